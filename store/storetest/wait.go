package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

func waitCases() []testCase {
	waitOn := func(h *harness, rec store.Record) store.WaitParams {
		return store.WaitParams{Tenant: rec.Tenant, Key: rec.Key, Token: rec.Token}
	}
	return []testCase{
		{"CompletedByHolder", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			collect := h.waitAsync(t, waitOn(h, rec))
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("seat 12A")}))
			res, err := collect()
			require.NoError(t, err)
			require.Equal(t, store.StatusCompleted, res.Status)
			assert.Equal(t, rec.Token, res.Record.Token)
			assertOutcome(t, []byte("seat 12A"), res.Record.Outcome)
		}},
		{"ManyWaitersAllWake", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			var collects []func() (store.Result, error)
			for range 8 {
				collects = append(collects, h.waitAsync(t, waitOn(h, rec)))
			}
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("x")}))
			for i, collect := range collects {
				res, err := collect()
				require.NoError(t, err, "waiter %d", i)
				assert.Equal(t, store.StatusCompleted, res.Status, "waiter %d", i)
			}
		}},
		{"FreeAfterRelease", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			collect := h.waitAsync(t, waitOn(h, rec))
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: "k", Token: rec.Token}))
			res, err := collect()
			require.NoError(t, err)
			assert.Equal(t, store.StatusFree, res.Status)
			assert.Zero(t, res.Record.Token, "StatusFree carries the zero Record")
		}},
		{"IndeterminateAfterMark", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			collect := h.waitAsync(t, waitOn(h, rec))
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Reason: "crashed mid-call"}))
			res, err := collect()
			require.NoError(t, err)
			require.Equal(t, store.StatusIndeterminate, res.Status)
			assert.Equal(t, "crashed mid-call", res.Record.Reason)
		}},
		{"HeldWhenLeaseRunsOut", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			collect := h.waitAsync(t, waitOn(h, rec))
			h.clock.Advance(h.lease + time.Second)
			res, err := collect()
			require.NoError(t, err)
			require.Equal(t, store.StatusHeld, res.Status)
			assert.True(t, res.LeaseExpired, "LeaseExpired")
			assert.Equal(t, rec.Token, res.Record.Token)
		}},
		{"HeldWhenTakenOver", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			collect := h.waitAsync(t, waitOn(h, rec))
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "successor", Lease: h.lease, Supersede: rec.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			got, err := collect()
			require.NoError(t, err)
			require.Equal(t, store.StatusHeld, got.Status)
			assert.False(t, got.LeaseExpired)
			assert.Equal(t, res.Record.Token, got.Record.Token, "Wait reports the new holder's token")
			assert.Equal(t, "successor", got.Record.Holder)
		}},
		{"ReturnsAtOnceWhenNotPendingUnderToken", func(t *testing.T, h *harness) {
			done := h.completed(t, "done", []byte("d"))
			marked := h.indeterminate(t, "marked", "r")
			other := h.acquire(t, "other")
			tests := []struct {
				name   string
				params store.WaitParams
				want   store.Status
			}{
				{"Free", store.WaitParams{Tenant: h.tenant, Key: "never", Token: 7}, store.StatusFree},
				{"Completed", waitOn(h, done), store.StatusCompleted},
				{"CompletedOtherToken", store.WaitParams{Tenant: h.tenant, Key: "done", Token: done.Token + 1}, store.StatusCompleted},
				{"Indeterminate", waitOn(h, marked), store.StatusIndeterminate},
				{"HeldByOtherToken", store.WaitParams{Tenant: h.tenant, Key: "other", Token: other.Token + 1}, store.StatusHeld},
			}
			for _, tt := range tests {
				res, err := h.wait(t, tt.params)
				require.NoError(t, err, tt.name)
				assert.Equal(t, tt.want, res.Status, tt.name)
			}
		}},
		{"FreeWhenRecordExpires", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			collect := h.waitAsync(t, waitOn(h, rec))
			h.clock.Advance(h.ttl + time.Second)
			res, err := collect()
			require.NoError(t, err)
			// The lease ran out long before the record expired; a store may
			// notice either first, but never report the claim as still held
			// within its lease.
			if res.Status == store.StatusHeld {
				assert.True(t, res.LeaseExpired, "a held answer after the lease ran out says so")
			} else {
				assert.Equal(t, store.StatusFree, res.Status)
			}
			res, err = h.wait(t, waitOn(h, rec))
			require.NoError(t, err)
			assert.Equal(t, store.StatusFree, res.Status, "an expired record reads as free")
		}},
		{"DeadlineReturnsContextError", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			ctx, cancel := context.WithTimeout(h.ctx, 50*time.Millisecond)
			defer cancel()
			_, err := h.s.Wait(ctx, waitOn(h, rec))
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, store.StatePending, h.lookup(t, "k").State, "a waiter giving up changes nothing")
		}},
		{"CancelReturnsContextError", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			ctx, cancel := context.WithCancel(h.ctx)
			type answer struct{ err error }
			ch := make(chan answer, 1)
			go func() {
				_, err := h.s.Wait(ctx, waitOn(h, rec))
				ch <- answer{err}
			}()
			cancel()
			select {
			case a := <-ch:
				require.ErrorIs(t, a.err, context.Canceled)
			case <-time.After(waitBound):
				t.Fatalf("Wait did not return within %v of its context being cancelled", waitBound)
			}
		}},
	}
}
