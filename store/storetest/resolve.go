package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

func resolveCases() []testCase {
	return []testCase{
		{"CompleteRecordsOutcome", func(t *testing.T, h *harness) {
			rec := h.indeterminate(t, "k", "unknown")
			h.clock.Advance(time.Minute)
			now := h.clock.Now()
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete, Outcome: []byte("confirmed by phone")}))
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusCompleted, res.Status)
			assertOutcome(t, []byte("confirmed by phone"), res.Record.Outcome)
			assert.Equal(t, rec.Tenant, res.Record.Tenant)
			got := h.lookup(t, "k")
			assert.Equal(t, store.StateCompleted, got.State)
			assertTime(t, now, got.UpdatedAt, "UpdatedAt")
		}},
		{"FreeReleasesKey", func(t *testing.T, h *harness) {
			rec := h.indeterminate(t, "k", "unknown")
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionFree}))
			h.requireMissing(t, h.tenant, "k")
			again := h.acquire(t, "k")
			assert.NotEqual(t, rec.Token, again.Token)
		}},
		{"WakesWaiterOnFree", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			collect := h.waitAsync(t, store.WaitParams{Tenant: h.tenant, Key: "k", Token: rec.Token})
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Reason: "r"}))
			res, err := collect()
			require.NoError(t, err)
			require.Equal(t, store.StatusIndeterminate, res.Status)
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionFree}))
			res, err = h.wait(t, store.WaitParams{Tenant: h.tenant, Key: "k", Token: rec.Token})
			require.NoError(t, err)
			assert.Equal(t, store.StatusFree, res.Status)
		}},
		{"PendingRefused", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			for _, d := range []store.Action{store.ActionComplete, store.ActionFree} {
				err := h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: d, Outcome: []byte("x")})
				require.ErrorIs(t, err, store.ErrNotIndeterminate, "Resolve(%v) on a pending record", d)
			}
			assertRecord(t, rec, h.lookup(t, "k"))
		}},
		{"CompletedRefused", func(t *testing.T, h *harness) {
			h.completed(t, "k", []byte("original"))
			want := h.lookup(t, "k")
			for _, d := range []store.Action{store.ActionComplete, store.ActionFree} {
				err := h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: d, Outcome: []byte("overwrite")})
				require.ErrorIs(t, err, store.ErrNotIndeterminate, "Resolve(%v) on a completed record", d)
			}
			assertRecord(t, want, h.lookup(t, "k"))
		}},
		{"MissingNotFound", func(t *testing.T, h *harness) {
			err := h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "never", Decision: store.ActionFree})
			require.ErrorIs(t, err, store.ErrNotFound)
			err = h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "never", Decision: store.ActionComplete, Outcome: []byte("x")})
			require.ErrorIs(t, err, store.ErrNotFound)
			h.requireMissing(t, h.tenant, "never")
		}},
		{"DecidedLongAfterTheWindow", func(t *testing.T, h *harness) {
			h.indeterminate(t, "k", "unknown")
			h.clock.Advance(h.ttl + time.Second)
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete, Outcome: []byte("x")}),
				"the record waited for the person")
			assertOutcome(t, []byte("x"), h.lookup(t, "k").Outcome)
		}},
		{"ForgottenNotFound", func(t *testing.T, h *harness) {
			h.indeterminate(t, "k", "unknown")
			_, err := h.s.Forget(h.ctx, store.ForgetParams{Tenant: h.tenant})
			require.NoError(t, err)
			err = h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete, Outcome: []byte("x")})
			require.ErrorIs(t, err, store.ErrNotFound)
			h.requireMissing(t, h.tenant, "k")
		}},
		{"SecondResolveRefused", func(t *testing.T, h *harness) {
			h.indeterminate(t, "done", "r")
			h.indeterminate(t, "freed", "r")
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "done", Decision: store.ActionComplete, Outcome: []byte("first")}))
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "freed", Decision: store.ActionFree}))
			err := h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "done", Decision: store.ActionComplete, Outcome: []byte("second")})
			require.ErrorIs(t, err, store.ErrNotIndeterminate)
			assertOutcome(t, []byte("first"), h.lookup(t, "done").Outcome)
			err = h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "freed", Decision: store.ActionFree})
			require.ErrorIs(t, err, store.ErrNotFound)
		}},
		{"MarkedKeyStaysIndeterminate", func(t *testing.T, h *harness) {
			// Until a person resolves it, every claim sees the mark, however
			// long after the lease.
			h.indeterminate(t, "k", "r")
			h.clock.Advance(h.ttl - time.Second)
			res := h.claim(t, "k", "worker-2")
			assert.Equal(t, store.StatusIndeterminate, res.Status)
		}},
	}
}
