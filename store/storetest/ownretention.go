package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// claimKept claims key with a retention window of its own and requires it
// acquired.
func (h *harness) claimKept(t *testing.T, key string, retention time.Duration) store.Record {
	t.Helper()
	res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: key, Holder: "holder-" + key, Lease: h.lease, Retention: retention})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	return res.Record
}

// ownRetentionCases prove that a record claimed with a retention window of
// its own (ClaimParams.Retention) keeps it, that every write restarts that
// window instead of the store's TTL, and that expiry and Sweep honour it,
// shorter or longer than the TTL.
func ownRetentionCases() []testCase {
	return []testCase{
		{"KeptWithTheRecord", func(t *testing.T, h *harness) {
			rec := h.claimKept(t, "k", 10*time.Minute)
			assert.Equal(t, 10*time.Minute, rec.Retention)
			assert.Equal(t, 10*time.Minute, h.lookup(t, "k").Retention)
			assert.Zero(t, h.acquire(t, "other").Retention, "a record of the store's TTL keeps none")
		}},
		{"ShorterThanTheTTL", func(t *testing.T, h *harness) {
			rec := h.claimKept(t, "k", 10*time.Minute)
			h.clock.Advance(30 * time.Second)
			done := h.clock.Now()
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("x")}))
			assertTime(t, done.Add(10*time.Minute), h.lookup(t, "k").ExpiresAt, "ExpiresAt after Complete")
			h.completed(t, "ttl", []byte("y"))
			h.clock.Advance(10*time.Minute - time.Second)
			assert.Equal(t, store.StateCompleted, h.lookup(t, "k").State, "live just before its own window ends")
			h.clock.Advance(2 * time.Second)
			h.requireMissing(t, h.tenant, "k")
			n, err := h.s.Sweep(h.ctx, store.SweepParams{})
			require.NoError(t, err)
			assert.Equal(t, 1, n, "Sweep reclaims the record past its own window, and only it")
			assert.Equal(t, store.StateCompleted, h.lookup(t, "ttl").State, "the store's TTL still governs the others")
			assert.Equal(t, store.StatusAcquired, h.claim(t, "k", "again").Status)
		}},
		{"LongerThanTheTTL", func(t *testing.T, h *harness) {
			rec := h.claimKept(t, "k", 3*h.ttl)
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("x")}))
			h.completed(t, "ttl", []byte("y"))
			h.clock.Advance(2 * h.ttl)
			n, err := h.s.Sweep(h.ctx, store.SweepParams{})
			require.NoError(t, err)
			assert.Equal(t, 1, n, "Sweep reclaims the record of the store's TTL only")
			h.requireMissing(t, h.tenant, "ttl")
			res := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusCompleted, res.Status, "past the store's TTL, within its own window: still the answer")
			assertOutcome(t, []byte("x"), res.Record.Outcome)
			h.clock.Advance(h.ttl + time.Second)
			h.requireMissing(t, h.tenant, "k")
			n, err = h.s.Sweep(h.ctx, store.SweepParams{})
			require.NoError(t, err)
			assert.Equal(t, 1, n)
		}},
		{"NeverBeforeTheLease", func(t *testing.T, h *harness) {
			now := h.clock.Now()
			rec := h.claimKept(t, "k", h.lease/2)
			assert.False(t, rec.ExpiresAt.Before(now.Add(h.lease)), "ExpiresAt %v ends before the lease", rec.ExpiresAt)
			h.clock.Advance(h.lease / 2)
			renewed := h.clock.Now()
			_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Lease: h.lease})
			require.NoError(t, err)
			assertTime(t, renewed.Add(h.lease), h.lookup(t, "k").ExpiresAt, "ExpiresAt after a renewal: the lease's end")
		}},
		{"RenewalRestartsIt", func(t *testing.T, h *harness) {
			rec := h.claimKept(t, "k", 10*time.Minute)
			for range 4 {
				h.clock.Advance(h.lease / 2)
				_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Lease: h.lease})
				require.NoError(t, err)
			}
			assertTime(t, h.clock.Now().Add(10*time.Minute), h.lookup(t, "k").ExpiresAt, "ExpiresAt after renewals")
		}},
		{"IndeterminateStillKeeps", func(t *testing.T, h *harness) {
			rec := h.claimKept(t, "k", 10*time.Minute)
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Reason: "r"}))
			h.clock.Advance(2 * h.ttl)
			_, err := h.s.Sweep(h.ctx, store.SweepParams{})
			require.NoError(t, err)
			require.Equal(t, store.StatusIndeterminate, h.claim(t, "k", "dup").Status, "an indeterminate record waits for a person, whatever its window")
			decided := h.clock.Now()
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete, Outcome: []byte("x"), Token: rec.Token}))
			got := h.lookup(t, "k")
			assertTime(t, decided.Add(10*time.Minute), got.ExpiresAt, "ExpiresAt after the decision: its own window")
			assert.Equal(t, 10*time.Minute, got.Retention)
		}},
		{"DecisionOnGoneKey", func(t *testing.T, h *harness) {
			now := h.clock.Now()
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete,
				Outcome: []byte("x"), RecordIfGone: true, Retention: 3 * h.ttl}))
			got := h.lookup(t, "k")
			assertTime(t, now.Add(3*h.ttl), got.ExpiresAt, "ExpiresAt")
			assert.Equal(t, 3*h.ttl, got.Retention)
			h.clock.Advance(2 * h.ttl)
			assert.Equal(t, store.StatusCompleted, h.claim(t, "k", "dup").Status)
		}},
		{"TakeoverReplacesIt", func(t *testing.T, h *harness) {
			rec := h.claimKept(t, "k", 3*h.ttl)
			h.clock.Advance(h.lease + time.Second)
			now := h.clock.Now()
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "taker", Lease: h.lease, Supersede: rec.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			got := h.lookup(t, "k")
			assert.Zero(t, got.Retention, "the takeover's claim gave none")
			assertTime(t, now.Add(h.ttl), got.ExpiresAt, "ExpiresAt by the store's TTL")
		}},
	}
}
