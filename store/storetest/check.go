package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// The check digests the cases keep: shaped as keyspace.DeriveCheck makes
// them, but opaque to a store, which keeps and returns them as given.
const (
	checkA = "c1:00000000000000a1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	checkB = "c1:00000000000000a1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// claimChecked claims key with the check digest check and requires it
// acquired.
func (h *harness) claimChecked(t *testing.T, key, check string) store.Record {
	t.Helper()
	res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: key, Holder: "holder-" + key, Lease: h.lease, Check: check})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	return res.Record
}

// checkCases prove that a record keeps the digest of its checked
// arguments (ClaimParams.Check) through every state and hands it to every
// reader — Claim, Wait, Lookup, List — so the dispatcher can compare it on
// every path that answers from a record.
func checkCases() []testCase {
	return []testCase{
		{"KeptThroughCompletion", func(t *testing.T, h *harness) {
			rec := h.claimChecked(t, "k", checkA)
			assert.Equal(t, checkA, rec.Check, "the acquired record")
			assert.Equal(t, checkA, h.lookup(t, "k").Check, "the pending record as stored")
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("x")}))
			dup := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusCompleted, dup.Status)
			assert.Equal(t, checkA, dup.Record.Check, "a duplicate's claim answers with the digest")
			assert.Equal(t, checkA, h.lookup(t, "k").Check)
		}},
		{"NoneIsEmpty", func(t *testing.T, h *harness) {
			rec := h.completed(t, "k", []byte("x"))
			assert.Empty(t, rec.Check)
			assert.Empty(t, h.claim(t, "k", "duplicate").Record.Check)
		}},
		{"HeldAnswersWithIt", func(t *testing.T, h *harness) {
			h.claimChecked(t, "k", checkA)
			res := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusHeld, res.Status)
			assert.Equal(t, checkA, res.Record.Check)
		}},
		{"IndeterminateKeepsIt", func(t *testing.T, h *harness) {
			rec := h.claimChecked(t, "k", checkA)
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Reason: "r"}))
			res := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusIndeterminate, res.Status)
			assert.Equal(t, checkA, res.Record.Check)
		}},
		{"WaitAnswersWithIt", func(t *testing.T, h *harness) {
			rec := h.claimChecked(t, "k", checkA)
			collect := h.waitAsync(t, store.WaitParams{Tenant: h.tenant, Key: "k", Token: rec.Token})
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("x")}))
			res, err := collect()
			require.NoError(t, err)
			require.Equal(t, store.StatusCompleted, res.Status)
			assert.Equal(t, checkA, res.Record.Check, "a waiter learns the digest of the record that answers it")
		}},
		{"TakeoverReplacesIt", func(t *testing.T, h *harness) {
			// A takeover is a new claim: the record keeps the digest of
			// the call that took it over, or none.
			rec := h.claimChecked(t, "k", checkA)
			h.clock.Advance(h.lease + time.Second)
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "taker", Lease: h.lease, Supersede: rec.Token, Check: checkB})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			assert.Equal(t, checkB, res.Record.Check)
			assert.Equal(t, checkB, h.lookup(t, "k").Check)

			h.clock.Advance(h.lease + time.Second)
			res, err = h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "taker-2", Lease: h.lease, Supersede: res.Record.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			assert.Empty(t, h.lookup(t, "k").Check, "a takeover without a digest keeps none")
		}},
		{"ExpiredRecordLeavesNone", func(t *testing.T, h *harness) {
			rec := h.claimChecked(t, "k", checkA)
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token}))
			h.clock.Advance(h.ttl + time.Second)
			again := h.acquire(t, "k")
			assert.Empty(t, again.Check)
			assert.Empty(t, h.lookup(t, "k").Check, "a claim of an expired key keeps nothing of the record it replaced")
		}},
		{"DecisionKeepsTheRecords", func(t *testing.T, h *harness) {
			// A person's decision on a record that stands keeps its
			// digest, whatever the decision carries: it is the digest of
			// the call that made the record.
			rec := h.claimChecked(t, "k", checkA)
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Reason: "r"}))
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete,
				Outcome: []byte("x"), Token: rec.Token, RecordIfGone: true, Check: checkB}))
			got := h.lookup(t, "k")
			assert.Equal(t, store.StateCompleted, got.State)
			assert.Equal(t, checkA, got.Check)
		}},
		{"DecisionOnGoneKeyKeepsTheParams", func(t *testing.T, h *harness) {
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete,
				Outcome: []byte("x"), RecordIfGone: true, Check: checkB}))
			res := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusCompleted, res.Status)
			assert.Equal(t, checkB, res.Record.Check, "the record a decision made on a gone key keeps the decided call's digest")
		}},
		{"ListedWithIt", func(t *testing.T, h *harness) {
			h.claimChecked(t, "k", checkA)
			page, err := h.s.List(h.ctx, store.ListParams{Tenant: h.tenant})
			require.NoError(t, err)
			require.Len(t, page.Records, 1)
			assert.Equal(t, checkA, page.Records[0].Check)
		}},
	}
}
