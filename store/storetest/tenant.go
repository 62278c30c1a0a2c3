package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// Tenants whose names a careless store could confuse: prefixes of each other,
// separators, pattern characters of SQL LIKE and Redis MATCH, and the two
// Unicode spellings of "ü" (stores compare bytes, so NFC and NFD are two
// tenants).
const (
	tenantNFC = "租户-\u00fc-😀"
	tenantNFD = "租户-u\u0308-😀"
)

func tenantCases() []testCase {
	return []testCase{
		{"SameKeyIndependentPerTenant", func(t *testing.T, h *harness) {
			a := h.acquireIn(t, "A", "k")
			b := h.acquireIn(t, "B", "k")
			assert.NotEqual(t, a.Token, b.Token)
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: "A", Key: "k", Token: a.Token, Outcome: []byte("a")}))
			assert.Equal(t, store.StatePending, h.lookupIn(t, "B", "k").State, "completing in A leaves B pending")
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: "B", Key: "k", Token: b.Token}))
			assertOutcome(t, []byte("a"), h.lookupIn(t, "A", "k").Outcome)
		}},
		{"OtherTenantCannotTouch", func(t *testing.T, h *harness) {
			pending := h.acquireIn(t, "A", "pending")
			h.indeterminateIn(t, "A", "marked", "r")
			wantPending := h.lookupIn(t, "A", "pending")
			wantMarked := h.lookupIn(t, "A", "marked")

			require.ErrorIs(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: "B", Key: "pending", Token: pending.Token}), store.ErrNotHolder, "Complete through B")
			require.ErrorIs(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: "B", Key: "pending", Token: pending.Token}), store.ErrNotHolder, "Release through B")
			require.ErrorIs(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: "B", Key: "pending", Token: pending.Token}), store.ErrNotHolder, "MarkIndeterminate through B")
			_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: "B", Key: "pending", Token: pending.Token, Lease: time.Hour})
			require.ErrorIs(t, err, store.ErrNotHolder, "Renew through B")
			require.ErrorIs(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: "B", Key: "marked", Decision: store.ActionFree}), store.ErrNotFound, "Resolve through B")
			h.requireMissing(t, "B", "pending")
			h.requireMissing(t, "B", "marked")
			res, err := h.wait(t, store.WaitParams{Tenant: "B", Key: "pending", Token: pending.Token})
			require.NoError(t, err)
			assert.Equal(t, store.StatusFree, res.Status, "Wait through B sees no record")
			n, err := h.s.Forget(h.ctx, store.ForgetParams{Tenant: "B"})
			require.NoError(t, err)
			assert.Zero(t, n, "Forget through B")
			res, err = h.s.Claim(h.ctx, store.ClaimParams{Tenant: "B", Key: "pending", Holder: "b", Lease: h.lease, Supersede: pending.Token})
			require.NoError(t, err)
			assert.Equal(t, store.StatusAcquired, res.Status, "B's claim is B's own record")
			assert.NotEqual(t, pending.Token, res.Record.Token)

			assertRecord(t, wantPending, h.lookupIn(t, "A", "pending"))
			assertRecord(t, wantMarked, h.lookupIn(t, "A", "marked"))
		}},
		{"ForgetErasesOneTenant", func(t *testing.T, h *harness) {
			h.acquireIn(t, "A", "pending")
			h.completedIn(t, "A", "completed", []byte("x"))
			h.indeterminateIn(t, "A", "marked", "r")
			keepB := h.completedIn(t, "B", "completed", []byte("b"))
			keepB2 := h.acquireIn(t, "B", "pending")

			n, err := h.s.Forget(h.ctx, store.ForgetParams{Tenant: "A"})
			require.NoError(t, err)
			assert.Equal(t, 3, n, "records erased")
			for _, key := range []string{"pending", "completed", "marked"} {
				h.requireMissing(t, "A", key)
				again := h.acquireIn(t, "A", key)
				assert.Equal(t, store.StatePending, again.State)
			}
			assert.Equal(t, keepB.Token, h.lookupIn(t, "B", "completed").Token)
			assert.Equal(t, keepB2.Token, h.lookupIn(t, "B", "pending").Token)

			n, err = h.s.Forget(h.ctx, store.ForgetParams{Tenant: "nobody"})
			require.NoError(t, err)
			assert.Zero(t, n, "Forget of a tenant with no records")
		}},
		{"ForgetWakesWaiter", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			collect := h.waitAsync(t, store.WaitParams{Tenant: h.tenant, Key: "k", Token: rec.Token})
			_, err := h.s.Forget(h.ctx, store.ForgetParams{Tenant: h.tenant})
			require.NoError(t, err)
			res, err := collect()
			require.NoError(t, err)
			assert.Equal(t, store.StatusFree, res.Status)
		}},
		{"ConfusableTenantsAndKeys", func(t *testing.T, h *harness) {
			type scoped struct{ tenant, key string }
			all := []scoped{
				{"a", "b:c"}, {"a:b", "c"}, {"a", "b/c"}, {"a/b", "c"}, {"a", "b\x1fc"}, {"a\x1fb", "c"},
				{"ab", "c"}, {"a", "bc"},
				{"t*", "k"}, {"t?", "k"}, {"t[x]", "k"}, {"tx", "k"},
				{"t%", "k"}, {"t_", "k"}, {"t\\", "k"}, {"t'", "k"}, {"t\"", "k"}, {"t{x}", "k"},
				{tenantNFC, "k"}, {tenantNFD, "k"},
				{"unicode", "ключ-\u00e9"}, {"unicode", "ключ-e\u0301"}, {"unicode", "🔑"},
			}
			tokens := make(map[scoped]int64, len(all))
			for _, s := range all {
				rec := h.acquireIn(t, s.tenant, s.key)
				assert.Equal(t, s.tenant, rec.Tenant, "tenant bytes round-trip")
				assert.Equal(t, s.key, rec.Key, "key bytes round-trip")
				tokens[s] = rec.Token
			}
			for _, s := range all {
				got := h.lookupIn(t, s.tenant, s.key)
				assert.Equal(t, tokens[s], got.Token, "tenant %q key %q", s.tenant, s.key)
				assert.Equal(t, s.tenant, got.Tenant)
				assert.Equal(t, s.key, got.Key)
			}
			for _, forget := range []string{"a", "t*", "t?", "t%", "t_", "t\\", tenantNFC} {
				n, err := h.s.Forget(h.ctx, store.ForgetParams{Tenant: forget})
				require.NoError(t, err)
				want := 0
				for _, s := range all {
					if s.tenant == forget {
						want++
					}
				}
				assert.Equal(t, want, n, "Forget(%q) erases exactly that tenant's records", forget)
				for _, s := range all {
					if s.tenant == forget {
						h.requireMissing(t, s.tenant, s.key)
					}
				}
			}
			forgotten := map[string]bool{"a": true, "t*": true, "t?": true, "t%": true, "t_": true, "t\\": true, tenantNFC: true}
			for _, s := range all {
				if !forgotten[s.tenant] {
					assert.Equal(t, tokens[s], h.lookupIn(t, s.tenant, s.key).Token, "tenant %q key %q survives others' Forget", s.tenant, s.key)
				}
			}
		}},
	}
}
