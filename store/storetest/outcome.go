package storetest

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

func outcomeCases() []testCase {
	allBytes := make([]byte, 512)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	big := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	tests := []struct {
		name    string
		outcome []byte
	}{
		{"AllByteValues", allBytes},
		{"NULBytes", []byte("\x00\x00seat\x0012A\x00")},
		{"InvalidUTF8", []byte{0xff, 0xfe, 0xc3, 0x28, 0x80}},
		{"Text", []byte(`{"seat":"12A","price":"€120"}`)},
		{"OneMiB", big},
		{"Nil", nil},
		{"Empty", []byte{}},
	}
	var cases []testCase
	for _, tt := range tests {
		cases = append(cases, testCase{"RoundTrip" + tt.name, func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			collect := h.waitAsync(t, store.WaitParams{Tenant: h.tenant, Key: "k", Token: rec.Token})
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: tt.outcome}))

			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusCompleted, res.Status)
			assertOutcome(t, tt.outcome, res.Record.Outcome)
			assertOutcome(t, tt.outcome, h.lookup(t, "k").Outcome)
			waited, err := collect()
			require.NoError(t, err)
			require.Equal(t, store.StatusCompleted, waited.Status)
			assertOutcome(t, tt.outcome, waited.Record.Outcome)
		}})
		cases = append(cases, testCase{"ResolveRoundTrip" + tt.name, func(t *testing.T, h *harness) {
			h.indeterminate(t, "k", "r")
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete, Outcome: tt.outcome}))
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusCompleted, res.Status)
			assertOutcome(t, tt.outcome, res.Record.Outcome)
		}})
	}
	return append(cases, testCase{"CallersCannotMutateRecords", func(t *testing.T, h *harness) {
		outcome := []byte("original")
		rec := h.acquire(t, "k")
		require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: outcome}))
		copy(outcome, "mutated!")
		got := h.lookup(t, "k")
		assertOutcome(t, []byte("original"), got.Outcome)
		copy(got.Outcome, "changed!")
		res := h.claim(t, "k", "worker-2")
		assertOutcome(t, []byte("original"), res.Record.Outcome)
		copy(res.Record.Outcome, "changed!")
		assert.True(t, bytes.Equal([]byte("original"), h.lookup(t, "k").Outcome), "a returned outcome shares no memory with the store")
	}})
}
