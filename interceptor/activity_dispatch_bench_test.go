package interceptor_test

import (
	"strconv"
	"testing"
)

// BenchmarkDispatch measures an activity execution through the test
// environment with the dispatcher in its path. NoPolicy is the baseline:
// the same execution with nothing claimed. Compare the others to it as
// ratios; the absolute times are mostly the SDK's.
func BenchmarkDispatch(b *testing.B) {
	cases := []struct {
		name string
		fn   func(h *harness) any
		// fresh gives every iteration a key of its own.
		fresh bool
	}{
		{"NoPolicy", func(h *harness) any { return h.acts.Plain }, true},
		{"ReadOnly", func(h *harness) any { return h.acts.Lookup }, true},
		{"EffectfulFresh", func(h *harness) any { return h.acts.Book }, true},
		{"IdempotentFresh", func(h *harness) any { return h.acts.Reserve }, true},
		{"EffectfulDeduplicated", func(h *harness) any { return h.acts.Book }, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			h := newHarness(b)
			env := h.activityEnv(b, "acme")
			fn := c.fn(h)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				flight := "BA117"
				if c.fresh {
					flight = "BA" + strconv.Itoa(i)
				}
				if _, err := book(env, fn, BookRequest{Flight: flight, RequestID: strconv.Itoa(i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
