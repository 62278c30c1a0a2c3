package pgstore

import "testing"

// bind numbers named parameters by their list's order, once, and refuses
// a statement and a list that disagree.
func TestBind(t *testing.T) {
	got := bind("SELECT @b, @a::text, @a_b, @b FROM {t} WHERE y = @_c", []string{"a", "b", "a_b", "_c"})
	if want := "SELECT $2, $1::text, $3, $2 FROM {t} WHERE y = $4"; got != want {
		t.Fatalf("bind = %q, want %q", got, want)
	}
	for name, c := range map[string]struct {
		sql   string
		names []string
	}{
		"unknown": {"SELECT @a, @b", []string{"a"}},
		"unused":  {"SELECT @a", []string{"a", "b"}},
		"twice":   {"SELECT @a", []string{"a", "a"}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("bind(%q, %v) did not panic", c.sql, c.names)
				}
			}()
			bind(c.sql, c.names)
		})
	}
}
