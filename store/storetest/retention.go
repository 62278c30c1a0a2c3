package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

func retentionCases() []testCase {
	return []testCase{
		{"CompletedRecordExpires", func(t *testing.T, h *harness) {
			rec := h.completed(t, "k", []byte("x"))
			h.clock.Advance(h.ttl - time.Second)
			assert.Equal(t, store.StateCompleted, h.lookup(t, "k").State, "live just before its window ends")
			h.clock.Advance(2 * time.Second)
			h.requireMissing(t, h.tenant, "k")
			again := h.acquire(t, "k")
			assert.NotEqual(t, rec.Token, again.Token, "a token is never reused for the same key")
			err := h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("old")})
			require.ErrorIs(t, err, store.ErrNotHolder, "the expired record's token")
			assertRecord(t, again, h.lookup(t, "k"))
		}},
		{"PendingRecordExpires", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			h.clock.Advance(h.ttl + time.Second)
			h.requireMissing(t, h.tenant, "k")
			for _, op := range fencedOps() {
				require.ErrorIs(t, op.call(h, h.tenant, "k", rec.Token), store.ErrNotHolder, "%s after the record expired", op.name)
			}
			h.requireMissing(t, h.tenant, "k")
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusAcquired, res.Status, "an expired pending record reads as free")
			assert.NotEqual(t, rec.Token, res.Record.Token)
			for _, op := range fencedOps() {
				require.ErrorIs(t, op.call(h, h.tenant, "k", rec.Token), store.ErrNotHolder, "%s with the expired token after a new claim", op.name)
			}
			assertRecord(t, res.Record, h.lookup(t, "k"))
		}},
		{"IndeterminateRecordKeepsUntilDecided", func(t *testing.T, h *harness) {
			// A key whose effect may have landed never reads as free while a
			// person decides, however long that takes; Sweep leaves it too.
			h.indeterminate(t, "k", "r")
			h.clock.Advance(10*h.ttl + time.Second)
			_, err := h.s.Sweep(h.ctx, store.SweepParams{})
			require.NoError(t, err)
			res := h.claim(t, "k", "worker-2")
			assert.Equal(t, store.StatusIndeterminate, res.Status)
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionFree}))
			assert.Equal(t, store.StatusAcquired, h.claim(t, "k", "worker-2").Status, "decided, the key is free")
		}},
		{"ClaimLeaseLongerThanTheWindow", func(t *testing.T, h *harness) {
			// A lease longer than the retention window: the record must
			// outlive the lease, as a renewal's does, or it expires under
			// a holder still within its lease and a duplicate finds the
			// key free and runs the effect a second time. Sweep leaves it
			// too.
			now := h.clock.Now()
			lease := 2 * h.ttl
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "slow", Lease: lease})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			assertTime(t, now.Add(lease), res.Record.LeaseUntil, "LeaseUntil")
			assert.False(t, res.Record.ExpiresAt.Before(res.Record.LeaseUntil), "ExpiresAt %v ends before the lease %v", res.Record.ExpiresAt, res.Record.LeaseUntil)
			assert.False(t, h.lookup(t, "k").ExpiresAt.Before(now.Add(lease)), "ExpiresAt as stored ends before the lease")
			h.clock.Advance(h.ttl + time.Second)
			_, err = h.s.Sweep(h.ctx, store.SweepParams{})
			require.NoError(t, err)
			dup := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusHeld, dup.Status, "within the holder's lease the key is held, past the retention window or not")
			assert.False(t, dup.LeaseExpired)
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: res.Record.Token, Outcome: []byte("x")}))
		}},
		{"RenewingClaimNeverExpires", func(t *testing.T, h *harness) {
			// A holder that keeps renewing is alive: its record must outlive
			// any number of retention windows, or a waiting duplicate would
			// find the key free and run the effect a second time.
			rec := h.acquire(t, "k")
			step := h.lease / 2
			for elapsed := time.Duration(0); elapsed < 3*h.ttl; elapsed += step {
				h.clock.Advance(step)
				now := h.clock.Now()
				until, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Lease: h.lease})
				require.NoError(t, err, "renew %v after the claim", elapsed+step)
				assertTime(t, now.Add(h.lease), until, "LeaseUntil")
				got := h.lookup(t, "k")
				require.Equal(t, store.StatePending, got.State, "%v after the claim", elapsed+step)
				require.False(t, got.ExpiresAt.Before(now.Add(h.lease)), "ExpiresAt %v ends before the lease %v", got.ExpiresAt, now.Add(h.lease))
				res := h.claim(t, "k", "worker-2")
				require.Equal(t, store.StatusHeld, res.Status, "a duplicate %v after the claim", elapsed+step)
			}
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("x")}))
			assert.Equal(t, store.StatusCompleted, h.claim(t, "k", "worker-2").Status)
		}},
		{"RenewRestartsWindow", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			h.clock.Advance(h.ttl / 2)
			now := h.clock.Now()
			_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Lease: h.lease})
			require.NoError(t, err)
			assertTime(t, now.Add(h.ttl), h.lookup(t, "k").ExpiresAt, "ExpiresAt")
		}},
		{"CompleteRestartsWindow", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			h.clock.Advance(h.ttl / 2)
			now := h.clock.Now()
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("x")}))
			assertTime(t, now.Add(h.ttl), h.lookup(t, "k").ExpiresAt, "ExpiresAt")
			h.clock.Advance(h.ttl/2 + time.Minute) // Past the claim's window, within the completion's.
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusCompleted, res.Status)
			assertOutcome(t, []byte("x"), res.Record.Outcome)
		}},
		{"MarkKeepsTheRecord", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			h.clock.Advance(h.ttl / 2)
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Reason: "r"}))
			assertTime(t, store.NeverExpires, h.lookup(t, "k").ExpiresAt, "ExpiresAt")
			h.clock.Advance(h.ttl/2 + time.Minute)
			assert.Equal(t, store.StatusIndeterminate, h.claim(t, "k", "worker-2").Status)
		}},
		{"ResolveCompleteRestartsWindow", func(t *testing.T, h *harness) {
			h.indeterminate(t, "k", "r")
			h.clock.Advance(h.ttl / 2)
			now := h.clock.Now()
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete, Outcome: []byte("y")}))
			assertTime(t, now.Add(h.ttl), h.lookup(t, "k").ExpiresAt, "ExpiresAt")
			h.clock.Advance(h.ttl/2 + time.Minute)
			assert.Equal(t, store.StatusCompleted, h.claim(t, "k", "worker-2").Status)
		}},
		{"SweepRemovesExpiredOnly", func(t *testing.T, h *harness) {
			h.completedIn(t, "A", "old-completed", []byte("x"))
			h.indeterminateIn(t, "A", "old-marked", "r")
			h.acquireIn(t, "B", "old-pending")
			h.clock.Advance(h.ttl + time.Second)
			live := []string{"new-pending", "new-completed"}
			h.acquireIn(t, "A", "new-pending")
			h.completedIn(t, "B", "new-completed", []byte("y"))
			h.clock.Advance(h.lease + time.Second) // The new claim's lease runs out; its record does not.

			total := 0
			for range 10 {
				n, err := h.s.Sweep(h.ctx, store.SweepParams{Limit: 2})
				require.NoError(t, err)
				require.LessOrEqual(t, n, 2, "Sweep honours its limit")
				if n == 0 {
					break
				}
				total += n
			}
			assert.Equal(t, 2, total, "every expired record is swept, and nothing else: an indeterminate one waits for a person")
			n, err := h.s.Sweep(h.ctx, store.SweepParams{})
			require.NoError(t, err)
			assert.Zero(t, n, "nothing left to sweep")
			assert.Equal(t, store.StatePending, h.lookupIn(t, "A", live[0]).State)
			assert.Equal(t, store.StateCompleted, h.lookupIn(t, "B", live[1]).State)
			assert.Equal(t, store.StateIndeterminate, h.lookupIn(t, "A", "old-marked").State)
		}},
		{"SweepDefaultLimit", func(t *testing.T, h *harness) {
			for _, key := range []string{"k1", "k2", "k3"} {
				h.completed(t, key, nil)
			}
			h.clock.Advance(h.ttl + time.Second)
			n, err := h.s.Sweep(h.ctx, store.SweepParams{})
			require.NoError(t, err)
			assert.Equal(t, 3, n, "a zero limit means DefaultSweepLimit")
		}},
		{"SweepEmpty", func(t *testing.T, h *harness) {
			n, err := h.s.Sweep(h.ctx, store.SweepParams{Limit: 10})
			require.NoError(t, err)
			assert.Zero(t, n)
		}},
	}
}
