package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// validationCases call every method with one malformed field and require an
// error matching store.ErrInvalid that names the field, with nothing written.
func validationCases() []testCase {
	long := strings.Repeat("x", store.MaxKeyLength+1)
	longTenant := strings.Repeat("t", store.MaxTenantLength+1)
	longHolder := strings.Repeat("h", store.MaxHolderLength+1)

	// Each call runs against a store in which tenant-a holds "pending"
	// (pending), "marked" (indeterminate) and "done" (completed).
	type call func(h *harness, token int64) error
	claim := func(p store.ClaimParams) call {
		return func(h *harness, _ int64) error { _, err := h.s.Claim(h.ctx, p); return err }
	}
	// complete fills a Token of -1 with the pending claim's token.
	complete := func(p store.CompleteParams) call {
		return func(h *harness, token int64) error {
			if p.Token == -1 {
				p.Token = token
			}
			return h.s.Complete(h.ctx, p)
		}
	}
	tests := []struct {
		name  string
		field string
		call  call
	}{
		{"ClaimEmptyTenant", "Tenant", claim(store.ClaimParams{Key: "new", Holder: "h", Lease: time.Minute})},
		{"ClaimLongTenant", "Tenant", claim(store.ClaimParams{Tenant: longTenant, Key: "new", Holder: "h", Lease: time.Minute})},
		{"ClaimNULTenant", "Tenant", claim(store.ClaimParams{Tenant: "tenant-a\x00", Key: "new", Holder: "h", Lease: time.Minute})},
		{"ClaimInvalidUTF8Tenant", "Tenant", claim(store.ClaimParams{Tenant: "tenant-a\xff", Key: "new", Holder: "h", Lease: time.Minute})},
		{"ClaimEmptyKey", "Key", claim(store.ClaimParams{Tenant: "tenant-a", Holder: "h", Lease: time.Minute})},
		{"ClaimLongKey", "Key", claim(store.ClaimParams{Tenant: "tenant-a", Key: long, Holder: "h", Lease: time.Minute})},
		{"ClaimNULKey", "Key", claim(store.ClaimParams{Tenant: "tenant-a", Key: "new\x00", Holder: "h", Lease: time.Minute})},
		{"ClaimEmptyHolder", "Holder", claim(store.ClaimParams{Tenant: "tenant-a", Key: "new", Lease: time.Minute})},
		{"ClaimLongHolder", "Holder", claim(store.ClaimParams{Tenant: "tenant-a", Key: "new", Holder: longHolder, Lease: time.Minute})},
		{"ClaimZeroLease", "Lease", claim(store.ClaimParams{Tenant: "tenant-a", Key: "new", Holder: "h"})},
		{"ClaimNegativeLease", "Lease", claim(store.ClaimParams{Tenant: "tenant-a", Key: "new", Holder: "h", Lease: -time.Second})},
		{"ClaimNegativeSupersede", "Supersede", claim(store.ClaimParams{Tenant: "tenant-a", Key: "pending", Holder: "h", Lease: time.Minute, Supersede: -1})},
		{"ClaimLongCheck", "Check", claim(store.ClaimParams{Tenant: "tenant-a", Key: "new", Holder: "h", Lease: time.Minute, Check: strings.Repeat("c", store.MaxCheckLength+1)})},
		{"ClaimNULCheck", "Check", claim(store.ClaimParams{Tenant: "tenant-a", Key: "new", Holder: "h", Lease: time.Minute, Check: "c1:\x00"})},
		{"ClaimNegativeRetention", "Retention", claim(store.ClaimParams{Tenant: "tenant-a", Key: "new", Holder: "h", Lease: time.Minute, Retention: -time.Second})},
		{"ClaimRetentionPastMax", "Retention", claim(store.ClaimParams{Tenant: "tenant-a", Key: "new", Holder: "h", Lease: time.Minute, Retention: store.MaxRetention + time.Hour})},
		{"ResolveGoneNegativeRetention", "Retention", func(h *harness, _ int64) error {
			return h.s.Resolve(h.ctx, store.ResolveParams{Tenant: "tenant-a", Key: "new", Decision: store.ActionComplete, RecordIfGone: true, Retention: -time.Second})
		}},
		{"ResolveGoneInvalidCheck", "Check", func(h *harness, _ int64) error {
			return h.s.Resolve(h.ctx, store.ResolveParams{Tenant: "tenant-a", Key: "new", Decision: store.ActionComplete, RecordIfGone: true, Check: "c1:\xff"})
		}},
		{"CompleteEmptyTenant", "Tenant", complete(store.CompleteParams{Key: "pending", Token: -1})},
		{"CompleteEmptyKey", "Key", complete(store.CompleteParams{Tenant: "tenant-a", Token: -1})},
		{"CompleteZeroToken", "Token", complete(store.CompleteParams{Tenant: "tenant-a", Key: "pending", Outcome: []byte("x")})},
		{"CompleteNULTenant", "Tenant", complete(store.CompleteParams{Tenant: "\x00", Key: "pending", Token: -1})},
		{"ReleaseZeroToken", "Token", func(h *harness, _ int64) error {
			return h.s.Release(h.ctx, store.ReleaseParams{Tenant: "tenant-a", Key: "pending"})
		}},
		{"ReleaseNegativeToken", "Token", func(h *harness, _ int64) error {
			return h.s.Release(h.ctx, store.ReleaseParams{Tenant: "tenant-a", Key: "pending", Token: -5})
		}},
		{"ReleaseEmptyKey", "Key", func(h *harness, token int64) error {
			return h.s.Release(h.ctx, store.ReleaseParams{Tenant: "tenant-a", Token: token})
		}},
		{"MarkZeroToken", "Token", func(h *harness, _ int64) error {
			return h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: "tenant-a", Key: "pending", Reason: "r"})
		}},
		{"MarkEmptyTenant", "Tenant", func(h *harness, token int64) error {
			return h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Key: "pending", Token: token, Reason: "r"})
		}},
		{"RenewZeroLease", "Lease", func(h *harness, token int64) error {
			_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: "tenant-a", Key: "pending", Token: token})
			return err
		}},
		{"RenewNegativeLease", "Lease", func(h *harness, token int64) error {
			_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: "tenant-a", Key: "pending", Token: token, Lease: -time.Minute})
			return err
		}},
		{"RenewZeroToken", "Token", func(h *harness, _ int64) error {
			_, err := h.s.Renew(h.ctx, store.RenewParams{Tenant: "tenant-a", Key: "pending", Lease: time.Hour})
			return err
		}},
		{"LookupEmptyTenant", "Tenant", func(h *harness, _ int64) error {
			_, err := h.s.Lookup(h.ctx, store.LookupParams{Key: "pending"})
			return err
		}},
		{"LookupEmptyKey", "Key", func(h *harness, _ int64) error {
			_, err := h.s.Lookup(h.ctx, store.LookupParams{Tenant: "tenant-a"})
			return err
		}},
		{"WaitZeroToken", "Token", func(h *harness, _ int64) error {
			_, err := h.s.Wait(h.ctx, store.WaitParams{Tenant: "tenant-a", Key: "pending"})
			return err
		}},
		{"WaitNULKey", "Key", func(h *harness, token int64) error {
			_, err := h.s.Wait(h.ctx, store.WaitParams{Tenant: "tenant-a", Key: "\x00", Token: token})
			return err
		}},
		{"ResolveZeroDecision", "Decision", func(h *harness, _ int64) error {
			return h.s.Resolve(h.ctx, store.ResolveParams{Tenant: "tenant-a", Key: "marked", Outcome: []byte("x")})
		}},
		{"ResolveUnknownDecision", "Decision", func(h *harness, _ int64) error {
			return h.s.Resolve(h.ctx, store.ResolveParams{Tenant: "tenant-a", Key: "marked", Decision: 99})
		}},
		{"ResolveEmptyKey", "Key", func(h *harness, _ int64) error {
			return h.s.Resolve(h.ctx, store.ResolveParams{Tenant: "tenant-a", Decision: store.ActionFree})
		}},
		{"ForgetEmptyTenant", "Tenant", func(h *harness, _ int64) error {
			_, err := h.s.Forget(h.ctx, store.ForgetParams{})
			return err
		}},
		{"ForgetNULTenant", "Tenant", func(h *harness, _ int64) error {
			_, err := h.s.Forget(h.ctx, store.ForgetParams{Tenant: "tenant-a\x00"})
			return err
		}},
		{"SweepNegativeLimit", "Limit", func(h *harness, _ int64) error {
			_, err := h.s.Sweep(h.ctx, store.SweepParams{Limit: -1})
			return err
		}},
	}
	var cases []testCase
	for _, tt := range tests {
		cases = append(cases, testCase{tt.name, func(t *testing.T, h *harness) {
			pending := h.acquire(t, "pending")
			h.indeterminate(t, "marked", "r")
			h.completed(t, "done", []byte("d"))
			want := map[string]store.Record{}
			for _, key := range []string{"pending", "marked", "done"} {
				want[key] = h.lookup(t, key)
			}

			err := tt.call(h, pending.Token)
			require.ErrorIs(t, err, store.ErrInvalid)
			var invalid *store.InvalidError
			if assert.ErrorAs(t, err, &invalid, "the error carries a *store.InvalidError") {
				assert.Equal(t, tt.field, invalid.Field, "the refused field")
			}

			h.requireMissing(t, h.tenant, "new")
			for key, rec := range want {
				assertRecord(t, rec, h.lookup(t, key))
			}
		}})
	}
	return cases
}
