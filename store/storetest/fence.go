package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// fencedOp is one of the calls a fencing token guards.
type fencedOp struct {
	name string
	call func(h *harness, tenant, key string, token int64) error
}

func fencedOps() []fencedOp {
	return []fencedOp{
		{"Complete", func(h *harness, tenant, key string, token int64) error {
			return h.s.Complete(h.ctx, store.CompleteParams{Tenant: tenant, Key: key, Token: token, Outcome: []byte("stale outcome")})
		}},
		{"Release", func(h *harness, tenant, key string, token int64) error {
			return h.s.Release(h.ctx, store.ReleaseParams{Tenant: tenant, Key: key, Token: token})
		}},
		{"MarkIndeterminate", func(h *harness, tenant, key string, token int64) error {
			return h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: key, Token: token, Reason: "stale reason"})
		}},
		{"Renew", func(h *harness, tenant, key string, token int64) error {
			_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: tenant, Key: key, Token: token, Lease: time.Hour})
			return err
		}},
	}
}

// staleSetup leaves key in some state and returns a token that must not be
// honoured, plus the record the key must still hold afterwards (nil when the
// key must stay free).
type staleSetup struct {
	name  string
	setup func(t *testing.T, h *harness, key string) (token int64, want *store.Record)
}

func staleSetups() []staleSetup {
	return []staleSetup{
		{"WrongToken", func(t *testing.T, h *harness, key string) (int64, *store.Record) {
			rec := h.acquire(t, key)
			return rec.Token + 1, &rec
		}},
		{"NeverClaimed", func(t *testing.T, h *harness, key string) (int64, *store.Record) {
			return 42, nil
		}},
		{"AfterRelease", func(t *testing.T, h *harness, key string) (int64, *store.Record) {
			rec := h.acquire(t, key)
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: key, Token: rec.Token}))
			return rec.Token, nil
		}},
		{"AfterComplete", func(t *testing.T, h *harness, key string) (int64, *store.Record) {
			rec := h.completed(t, key, []byte("first outcome"))
			want := h.lookup(t, key)
			return rec.Token, &want
		}},
		{"AfterMarkIndeterminate", func(t *testing.T, h *harness, key string) (int64, *store.Record) {
			rec := h.indeterminate(t, key, "first reason")
			want := h.lookup(t, key)
			return rec.Token, &want
		}},
		{"AfterSupersede", func(t *testing.T, h *harness, key string) (int64, *store.Record) {
			rec := h.acquire(t, key)
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: key, Holder: "successor", Lease: h.lease, Supersede: rec.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			return rec.Token, &res.Record
		}},
		{"AfterReclaim", func(t *testing.T, h *harness, key string) (int64, *store.Record) {
			rec := h.acquire(t, key)
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: key, Token: rec.Token}))
			again := h.acquire(t, key)
			return rec.Token, &again
		}},
		{"OtherKeysToken", func(t *testing.T, h *harness, key string) (int64, *store.Record) {
			other := h.acquire(t, key+"-other")
			rec := h.acquire(t, key)
			return other.Token, &rec
		}},
	}
}

func fenceCases() []testCase {
	var cases []testCase
	for _, setup := range staleSetups() {
		for _, op := range fencedOps() {
			cases = append(cases, testCase{"Refuses" + op.name + setup.name, func(t *testing.T, h *harness) {
				token, want := setup.setup(t, h, "k")
				err := op.call(h, h.tenant, "k", token)
				require.ErrorIs(t, err, store.ErrNotHolder, "%s with a token that does not hold the claim", op.name)
				if want == nil {
					h.requireMissing(t, h.tenant, "k")
					return
				}
				assertRecord(t, *want, h.lookup(t, "k"))
			}})
		}
	}
	return append(cases,
		testCase{"CompleteRecordsOutcome", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			h.clock.Advance(10 * time.Second)
			now := h.clock.Now()
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("ok")}))
			want := rec
			want.State = store.StateCompleted
			want.Outcome = []byte("ok")
			want.UpdatedAt = now
			want.ExpiresAt = now.Add(h.ttl)
			got := h.lookup(t, "k")
			want.LeaseUntil = got.LeaseUntil // What a lease means once the claim ended is the store's business.
			assertRecord(t, want, got)
		}},
		testCase{"MarkIndeterminateRecordsReason", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			h.clock.Advance(10 * time.Second)
			now := h.clock.Now()
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Reason: "connection reset after send"}))
			want := rec
			want.State = store.StateIndeterminate
			want.Reason = "connection reset after send"
			want.UpdatedAt = now
			want.ExpiresAt = store.NeverExpires // until a person decides
			got := h.lookup(t, "k")
			want.LeaseUntil = got.LeaseUntil // What a lease means once the claim ended is the store's business.
			assertRecord(t, want, got)
		}},
		testCase{"RenewExtendsLease", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			h.clock.Advance(h.lease / 2)
			now := h.clock.Now()
			until, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Lease: 2 * h.lease})
			require.NoError(t, err)
			assertTime(t, now.Add(2*h.lease), until, "Renew's answer")
			got := h.lookup(t, "k")
			assertTime(t, until, got.LeaseUntil, "LeaseUntil")
			assert.Equal(t, rec.Token, got.Token, "Renew keeps the token")
			assert.Equal(t, store.StatePending, got.State)

			h.clock.Advance(h.lease) // Past the first lease, within the renewed one.
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusHeld, res.Status)
			assert.False(t, res.LeaseExpired, "the renewed lease has not run out")
		}},
		testCase{"HolderKeepsClaimAfterLeaseExpiry", func(t *testing.T, h *harness) {
			// Nobody took the claim over, so the token still holds it.
			rec := h.acquire(t, "k")
			h.clock.Advance(h.lease + time.Second)
			_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Lease: h.lease})
			require.NoError(t, err, "Renew after the lease ran out, with nobody taking over")
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("late but fine")}))
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusCompleted, res.Status)
			assertOutcome(t, []byte("late but fine"), res.Record.Outcome)
		}},
		testCase{"DoubleReleaseRefused", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: "k", Token: rec.Token}))
			err := h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: "k", Token: rec.Token})
			require.ErrorIs(t, err, store.ErrNotHolder)
		}},
	)
}
