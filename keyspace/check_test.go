package keyspace_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/keyspace"
)

func check(t *testing.T, args any, names ...string) keyspace.Check {
	t.Helper()
	c, err := keyspace.DeriveCheck(keyspace.CheckInput{Tenant: "acme", Run: "run_1", Activity: "book", Arguments: args, Names: names})
	require.NoError(t, err)
	return c
}

func TestDeriveCheck(t *testing.T) {
	t.Parallel()
	base := check(t, map[string]any{"fare": 120.0, "seat": "12A", "flight": "BA117"}, "fare", "seat")
	assert.True(t, strings.HasPrefix(string(base), keyspace.CheckVersion+":"), "opens with its version: %s", base)
	assert.Len(t, string(base), 84)
	_, err := keyspace.ParseKey(string(base))
	assert.Error(t, err, "a check is never a key")

	t.Run("Spellings", func(t *testing.T) {
		type req struct {
			Flight string  `json:"flight"`
			Seat   string  `json:"seat"`
			Fare   float64 `json:"fare"`
		}
		assert.Equal(t, base, check(t, map[string]any{"seat": "12A", "fare": 120, "flight": "LH400"}, "seat", "fare"),
			"other key arguments, other order, 120 for 120.0: the same check")
		assert.Equal(t, base, check(t, req{Flight: "x", Seat: "12A", Fare: 120}, "fare", "seat"), "a struct with the same JSON")
	})
	t.Run("Differs", func(t *testing.T) {
		other := check(t, map[string]any{"fare": 120.0, "seat": "14C"}, "fare", "seat")
		assert.NotEqual(t, base, other)
		assert.True(t, base.Differs(other))
		assert.True(t, base.Comparable(other))
		assert.False(t, base.Differs(base))
	})
	t.Run("AbsentIsNotNull", func(t *testing.T) {
		absent := check(t, map[string]any{"fare": 120.0}, "fare", "seat")
		null := check(t, map[string]any{"fare": 120.0, "seat": nil}, "fare", "seat")
		empty := check(t, map[string]any{"fare": 120.0, "seat": ""}, "fare", "seat")
		assert.NotEqual(t, absent, null)
		assert.NotEqual(t, absent, empty)
		assert.NotEqual(t, null, empty)
		assert.Equal(t, absent, check(t, map[string]any{"fare": 120.0}, "seat", "fare"), "absent is deterministic")
	})
	t.Run("OtherNamesAreNotComparable", func(t *testing.T) {
		more := check(t, map[string]any{"fare": 120.0, "seat": "12A", "meal": "vegan"}, "fare", "seat", "meal")
		assert.False(t, base.Comparable(more), "a declaration that checks other arguments cannot tell")
		assert.False(t, base.Differs(more))
		assert.False(t, base.Comparable(""), "a record without a check")
		assert.False(t, keyspace.Check("").Differs(base))
		assert.False(t, base.Differs("c1:not a check"))
	})
	t.Run("Scoped", func(t *testing.T) {
		c, err := keyspace.DeriveCheck(keyspace.CheckInput{Tenant: "globex", Run: "run_1", Activity: "book",
			Arguments: map[string]any{"fare": 120.0, "seat": "12A"}, Names: []string{"fare", "seat"}})
		require.NoError(t, err)
		assert.NotEqual(t, base, c, "equal values in another tenant: another digest")
		assert.True(t, base.Comparable(c), "but the same names")
	})
	t.Run("Errors", func(t *testing.T) {
		for name, in := range map[string]keyspace.CheckInput{
			"NoNames":   {Tenant: "a", Run: "r", Activity: "x", Arguments: map[string]any{}},
			"NoTenant":  {Run: "r", Activity: "x", Names: []string{"a"}},
			"Duplicate": {Tenant: "a", Run: "r", Activity: "x", Names: []string{"a", "a"}},
		} {
			_, err := keyspace.DeriveCheck(in)
			assert.ErrorIs(t, err, keyspace.ErrInvalidInput, name)
		}
		_, err := keyspace.DeriveCheck(keyspace.CheckInput{Tenant: "a", Run: "r", Activity: "x",
			Arguments: map[string]any{"fare": make(chan int)}, Names: []string{"fare"}})
		assert.ErrorIs(t, err, keyspace.ErrUnencodable)
	})
}
