package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// undoCases hold a store to the rule for a claim whose fate is uncertain
// (see store.Store.Claim): undoing it removes only what it created, and a
// takeover never leaves the key free.
func undoCases() []testCase {
	return []testCase{
		{"TakeoverCancelledInFlightKeepsTheKey", func(t *testing.T, h *harness) {
			// The lost holder's record said "someone may have done this".
			// A takeover whose context ends at any moment — before it is
			// sent, while the server runs it, after it committed but before
			// the answer arrived — must leave that meaning standing: the
			// superseded record, or the takeover itself (with its lease
			// ended, or live when the store could not take it back), never a
			// free key the next attempt would run the body on.
			//
			// The deadlines sweep the round trip so that some end while the
			// statement or script is in flight; what is asserted holds for
			// every one of them, so a store without an in-flight window
			// (memory) passes trivially.
			const rounds = 30
			var cancelled, stood int
			for i := range rounds {
				key := fmt.Sprintf("k%03d", i)
				lost := h.acquire(t, key)
				h.clock.Advance(h.lease + time.Second)
				ctx, cancel := context.WithTimeout(h.ctx, time.Duration(i)*80*time.Microsecond)
				res, err := h.s.Claim(ctx, store.ClaimParams{Tenant: h.tenant, Key: key, Holder: "successor", Lease: h.lease, Supersede: lost.Token})
				cancel()
				if err == nil {
					require.Equal(t, store.StatusAcquired, res.Status, "round %d: a takeover that answered", i)
					continue
				}
				require.Truef(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnavailable),
					"round %d: a takeover whose context ended returned %v", i, err)
				cancelled++
				rec, lerr := h.s.Lookup(h.ctx, store.LookupParams{Tenant: h.tenant, Key: key})
				require.NoErrorf(t, lerr, "round %d: the takeover was undone, and the key it took over must not be free", i)
				require.Equal(t, store.StatePending, rec.State, "round %d", i)
				if rec.Token == lost.Token {
					assertRecord(t, lost, rec)
				} else {
					stood++
					assert.Equal(t, "successor", rec.Holder, "round %d: only the takeover may stand instead", i)
				}
				next := h.claim(t, key, "next-attempt")
				require.Equalf(t, store.StatusHeld, next.Status, "round %d: the next attempt must find the key held, never free", i)
			}
			t.Logf("%d of %d takeovers ended in flight; %d left the takeover standing, %d the superseded record",
				cancelled, rounds, stood, cancelled-stood)
		}},
	}
}
