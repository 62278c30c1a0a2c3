package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

func claimCases() []testCase {
	return []testCase{
		{"FreshClaimAcquires", func(t *testing.T, h *harness) {
			now := h.clock.Now()
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-1", Lease: h.lease})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			assert.False(t, res.LeaseExpired, "LeaseExpired on a fresh claim")
			rec := res.Record
			assert.Positive(t, rec.Token, "Token")
			assertRecord(t, store.Record{
				Tenant:     h.tenant,
				Key:        "k",
				State:      store.StatePending,
				Holder:     "worker-1",
				Token:      rec.Token,
				LeaseUntil: now.Add(h.lease),
				ExpiresAt:  now.Add(h.ttl),
				CreatedAt:  now,
				UpdatedAt:  now,
			}, rec)
			assertRecord(t, rec, h.lookup(t, "k"))
		}},
		{"SecondClaimSeesHeld", func(t *testing.T, h *harness) {
			first := h.acquire(t, "k")
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusHeld, res.Status)
			assert.False(t, res.LeaseExpired, "LeaseExpired within the lease")
			assertRecord(t, first, res.Record)
			assertRecord(t, first, h.lookup(t, "k"))
		}},
		{"ConcurrentClaimsOneWinner", func(t *testing.T, h *harness) {
			const callers = 64
			var (
				start   = make(chan struct{})
				wg      sync.WaitGroup
				results = make([]store.Result, callers)
				errs    = make([]error, callers)
			)
			for i := range callers {
				wg.Go(func() {
					<-start
					results[i], errs[i] = h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "race", Holder: "racer", Lease: h.lease})
				})
			}
			close(start)
			wg.Wait()
			var acquired, held int
			var winner int64
			for i := range callers {
				require.NoError(t, errs[i], "caller %d", i)
				switch results[i].Status {
				case store.StatusAcquired:
					acquired++
					winner = results[i].Record.Token
				case store.StatusHeld:
					held++
				default:
					t.Errorf("caller %d: status %v", i, results[i].Status)
				}
			}
			require.Equal(t, 1, acquired, "exactly one caller acquires")
			require.Equal(t, callers-1, held, "every other caller sees the claim held")
			for i := range callers {
				assert.Equal(t, winner, results[i].Record.Token, "caller %d sees the winner's token", i)
			}
			assert.Equal(t, winner, h.lookup(t, "race").Token)
		}},
		{"ClaimOnCompletedSeesOutcome", func(t *testing.T, h *harness) {
			outcome := []byte("booked seat 12A")
			rec := h.completed(t, "k", outcome)
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusCompleted, res.Status)
			assert.Equal(t, store.StateCompleted, res.Record.State)
			assert.Equal(t, rec.Token, res.Record.Token, "the completed record keeps its token")
			assert.Equal(t, rec.Holder, res.Record.Holder, "the completed record keeps its holder")
			assertOutcome(t, outcome, res.Record.Outcome)
		}},
		{"ClaimOnIndeterminateSeesReason", func(t *testing.T, h *harness) {
			rec := h.indeterminate(t, "k", "timed out after sending")
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusIndeterminate, res.Status)
			assert.Equal(t, store.StateIndeterminate, res.Record.State)
			assert.Equal(t, rec.Token, res.Record.Token)
			assert.Equal(t, "timed out after sending", res.Record.Reason)
		}},
		{"ReleaseFreesKey", func(t *testing.T, h *harness) {
			first := h.acquire(t, "k")
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: "k", Token: first.Token}))
			h.requireMissing(t, h.tenant, "k")
			second := h.acquire(t, "k")
			assert.NotEqual(t, first.Token, second.Token, "a token is never reused for the same key")
		}},
		{"LeaseExpiredIsHeldNotAcquired", func(t *testing.T, h *harness) {
			first := h.acquire(t, "k")
			h.clock.Advance(h.lease + 1000*timeTolerance)
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusHeld, res.Status, "an expired lease is reported, never taken over implicitly")
			assert.True(t, res.LeaseExpired, "LeaseExpired")
			assertRecord(t, first, res.Record)
		}},
		{"SupersedeRightTokenTakesOver", func(t *testing.T, h *harness) {
			first := h.acquire(t, "k")
			h.clock.Advance(h.lease + 1000*timeTolerance)
			now := h.clock.Now()
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-2", Lease: h.lease, Supersede: first.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			second := res.Record
			assert.NotEqual(t, first.Token, second.Token, "the takeover gets a new token")
			assert.Positive(t, second.Token)
			assert.Equal(t, "worker-2", second.Holder)
			assert.Equal(t, store.StatePending, second.State)
			assertTime(t, now.Add(h.lease), second.LeaseUntil, "LeaseUntil")

			err = h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: first.Token, Outcome: []byte("late")})
			require.ErrorIs(t, err, store.ErrNotHolder, "the superseded token is fenced off")
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: second.Token, Outcome: []byte("new")}))
			got := h.lookup(t, "k")
			assert.Equal(t, second.Token, got.Token)
			assertOutcome(t, []byte("new"), got.Outcome)
		}},
		{"SupersedeWithinLeaseTakesOver", func(t *testing.T, h *harness) {
			first := h.acquire(t, "k")
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-2", Lease: h.lease, Supersede: first.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status, "the caller decided the holder is gone; the lease does not overrule it")
			assert.NotEqual(t, first.Token, res.Record.Token)
		}},
		{"SupersedeWrongTokenIsHeld", func(t *testing.T, h *harness) {
			first := h.acquire(t, "k")
			h.clock.Advance(h.lease + 1000*timeTolerance)
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-2", Lease: h.lease, Supersede: first.Token + 1})
			require.NoError(t, err)
			require.Equal(t, store.StatusHeld, res.Status)
			assert.True(t, res.LeaseExpired)
			assertRecord(t, first, res.Record)
			assertRecord(t, first, h.lookup(t, "k"))
		}},
		{"SupersedeOnFreeKeyAcquires", func(t *testing.T, h *harness) {
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-2", Lease: h.lease, Supersede: 12345})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			assert.NotEqual(t, int64(12345), res.Record.Token, "the token is the store's, not the superseded one")
		}},
		{"SupersedeOnCompletedSeesOutcome", func(t *testing.T, h *harness) {
			rec := h.completed(t, "k", []byte("done"))
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-2", Lease: h.lease, Supersede: rec.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusCompleted, res.Status, "only a pending claim can be taken over")
			assertOutcome(t, []byte("done"), res.Record.Outcome)
		}},
		{"SupersedeOnIndeterminateSeesIndeterminate", func(t *testing.T, h *harness) {
			rec := h.indeterminate(t, "k", "unknown")
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-2", Lease: h.lease, Supersede: rec.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusIndeterminate, res.Status, "only a pending claim can be taken over")
			assert.Equal(t, "unknown", res.Record.Reason)
		}},
		{"CancelledContextLeavesNoClaim", func(t *testing.T, h *harness) {
			ctx, cancel := context.WithCancel(h.ctx)
			cancel()
			_, err := h.s.Claim(ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "worker-1", Lease: h.lease})
			require.ErrorIs(t, err, context.Canceled)
			h.requireMissing(t, h.tenant, "k")
			h.acquire(t, "k")
		}},
		{"KeysAreIndependent", func(t *testing.T, h *harness) {
			a := h.acquire(t, "k1")
			b := h.acquire(t, "k2")
			assert.NotEqual(t, a.Token, b.Token)
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k1", Token: a.Token, Outcome: []byte("one")}))
			assert.Equal(t, store.StatePending, h.lookup(t, "k2").State)
		}},
	}
}
