package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// trailCases cover the resolution trail and the fenced Resolve.
func trailCases() []testCase {
	return []testCase{
		{"KeptWithTheOutcome", func(t *testing.T, h *harness) {
			h.indeterminate(t, "k", "unknown")
			h.clock.Advance(time.Minute)
			now := h.clock.Now()
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete,
				Outcome: []byte("ok"), By: "alice@ops", Reason: "the airline confirmed by phone", Reference: "TICKET-42 / PNR ABC123"}))
			for what, rec := range map[string]store.Record{"Lookup": h.lookup(t, "k"), "Claim": h.claim(t, "k", "worker-2").Record} {
				r := rec.Resolution
				assert.Equal(t, store.ActionComplete, r.Action, what)
				assert.Equal(t, "alice@ops", r.By, what)
				assert.Equal(t, "the airline confirmed by phone", r.Reason, what)
				assert.Equal(t, "TICKET-42 / PNR ABC123", r.Reference, what)
				assertTime(t, now, r.At, what+" Resolution.At")
				assert.Equal(t, "unknown", rec.Reason, what+": the indeterminate reason stays")
			}
			listed := h.listAll(t, store.ListParams{Tenant: h.tenant}, 10)
			require.Len(t, listed, 1)
			assert.Equal(t, "alice@ops", listed[0].Resolution.By, "List")
		}},
		{"OptionalText", func(t *testing.T, h *harness) {
			h.indeterminate(t, "k", "r")
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete}))
			r := h.lookup(t, "k").Resolution
			assert.Equal(t, store.ActionComplete, r.Action)
			assert.Empty(t, r.By+r.Reason+r.Reference)
			assert.False(t, r.At.IsZero())
		}},
		{"NoneWithoutADecision", func(t *testing.T, h *harness) {
			h.completed(t, "done", []byte("x"))
			h.indeterminate(t, "marked", "r")
			h.acquire(t, "pending")
			for _, key := range []string{"done", "marked", "pending"} {
				assert.Equal(t, store.Resolution{}, h.lookup(t, key).Resolution, key)
			}
		}},
		{"ClearedByANewClaim", func(t *testing.T, h *harness) {
			h.indeterminate(t, "k", "r")
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete, By: "alice"}))
			h.clock.Advance(h.ttl + time.Second)
			rec := h.acquire(t, "k")
			assert.Equal(t, store.Resolution{}, rec.Resolution)
			assert.Equal(t, store.Resolution{}, h.lookup(t, "k").Resolution)
		}},
		{"FencedByToken", func(t *testing.T, h *harness) {
			rec := h.indeterminate(t, "k", "r")
			for _, d := range []store.Action{store.ActionComplete, store.ActionFree} {
				err := h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: d, Outcome: []byte("x"), Token: rec.Token + 1})
				require.ErrorIs(t, err, store.ErrNotHolder, "Resolve(%v) with another token", d)
			}
			got := h.lookup(t, "k")
			assert.Equal(t, store.StateIndeterminate, got.State)
			assert.Equal(t, store.Resolution{}, got.Resolution)
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete, Outcome: []byte("x"), Token: rec.Token}))
			assert.Equal(t, store.StateCompleted, h.lookup(t, "k").State)
		}},
		{"LateDecisionLeavesANewerRecord", func(t *testing.T, h *harness) {
			// Two callers waited on one key; the first applied the
			// decision, the key was claimed again and became indeterminate
			// anew. The second caller's late copy of the decision must not
			// settle the record nobody has decided on.
			first := h.indeterminate(t, "k", "first")
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionFree, Token: first.Token}))
			second := h.indeterminate(t, "k", "second")
			require.NotEqual(t, first.Token, second.Token)
			for _, d := range []store.Action{store.ActionFree, store.ActionComplete} {
				err := h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: d, Outcome: []byte("x"), Token: first.Token})
				require.ErrorIs(t, err, store.ErrNotHolder, "late Resolve(%v)", d)
			}
			got := h.lookup(t, "k")
			assert.Equal(t, store.StateIndeterminate, got.State)
			assert.Equal(t, second.Token, got.Token)
			assert.Equal(t, "second", got.Reason)
		}},
		{"FenceOnSettledRecords", func(t *testing.T, h *harness) {
			done := h.indeterminate(t, "done", "r")
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "done", Decision: store.ActionComplete, Outcome: []byte("first"), Token: done.Token}))
			err := h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "done", Decision: store.ActionComplete, Outcome: []byte("again"), Token: done.Token})
			require.ErrorIs(t, err, store.ErrNotIndeterminate, "the same decision twice")
			assertOutcome(t, []byte("first"), h.lookup(t, "done").Outcome)
			pending := h.acquire(t, "pending")
			err = h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "pending", Decision: store.ActionFree, Token: pending.Token})
			require.ErrorIs(t, err, store.ErrNotIndeterminate)
			err = h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "gone", Decision: store.ActionFree, Token: 7})
			require.ErrorIs(t, err, store.ErrNotFound)
		}},
		{"Refused", func(t *testing.T, h *harness) {
			h.indeterminate(t, "k", "r")
			long := strings.Repeat("x", store.MaxResolutionTextLength+1)
			for name, p := range map[string]store.ResolveParams{
				"negative token":   {Token: -1},
				"long by":          {By: long},
				"long reason":      {Reason: long},
				"long reference":   {Reference: long},
				"NUL in by":        {By: "a\x00b"},
				"invalid UTF-8":    {Reason: "\xff"},
				"NUL in reference": {Reference: "\x00"},
			} {
				p.Tenant, p.Key, p.Decision, p.Outcome = h.tenant, "k", store.ActionComplete, []byte("x")
				require.ErrorIs(t, h.s.Resolve(h.ctx, p), store.ErrInvalid, name)
			}
			got := h.lookup(t, "k")
			assert.Equal(t, store.StateIndeterminate, got.State, "nothing written")
			assert.Equal(t, store.Resolution{}, got.Resolution)
			// The bound itself is accepted.
			limit := strings.Repeat("é", store.MaxResolutionTextLength/2)
			require.NoError(t, h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionComplete, By: limit, Reason: limit, Reference: limit}))
			assert.Equal(t, limit, h.lookup(t, "k").Resolution.Reference)
		}},
	}
}

// goneCases cover ResolveParams.RecordIfGone.
func goneCases() []testCase {
	decide := func(h *harness, key string, token int64) store.ResolveParams {
		return store.ResolveParams{Tenant: h.tenant, Key: key, Decision: store.ActionComplete, Outcome: []byte("booked"),
			Token: token, By: "alice", Reason: "the airline has it", RecordIfGone: true}
	}
	return []testCase{
		{"RecordsTheOutcomeOfAGoneRecord", func(t *testing.T, h *harness) {
			// Indeterminate records keep until decided; one can still be
			// gone (its tenant forgotten, or written by an earlier version
			// that let it expire).
			rec := h.indeterminate(t, "k", "r")
			_, err := h.s.Forget(h.ctx, store.ForgetParams{Tenant: h.tenant})
			require.NoError(t, err)
			h.clock.Advance(time.Second)
			now := h.clock.Now()
			require.NoError(t, h.s.Resolve(h.ctx, decide(h, "k", rec.Token)))
			res := h.claim(t, "k", "worker-2")
			require.Equal(t, store.StatusCompleted, res.Status, "the effect is not run again")
			assertOutcome(t, []byte("booked"), res.Record.Outcome)
			got := h.lookup(t, "k")
			assert.Equal(t, store.ResolveHolder, got.Holder)
			assert.NotEqual(t, rec.Token, got.Token)
			assert.Equal(t, "alice", got.Resolution.By)
			assert.Equal(t, store.ActionComplete, got.Resolution.Action)
			assertTime(t, now, got.CreatedAt, "CreatedAt")
			assertTime(t, now.Add(h.ttl), got.ExpiresAt, "ExpiresAt")
			assert.Equal(t, []string{"k"}, keysOf(h.listAll(t, store.ListParams{Tenant: h.tenant, States: []store.State{store.StateCompleted}}, 10)))
		}},
		{"RecordsTheOutcomeOfASweptRecord", func(t *testing.T, h *harness) {
			h.indeterminate(t, "k", "r")
			_, err := h.s.Forget(h.ctx, store.ForgetParams{Tenant: h.tenant})
			require.NoError(t, err)
			h.clock.Advance(h.ttl + time.Second)
			_, err = h.s.Sweep(h.ctx, store.SweepParams{})
			require.NoError(t, err)
			require.NoError(t, h.s.Resolve(h.ctx, decide(h, "k", 0)))
			assertOutcome(t, []byte("booked"), h.lookup(t, "k").Outcome)
		}},
		{"LeavesAKeyClaimedAgain", func(t *testing.T, h *harness) {
			old := h.indeterminate(t, "k", "r")
			_, err := h.s.Forget(h.ctx, store.ForgetParams{Tenant: h.tenant})
			require.NoError(t, err)
			fresh := h.acquire(t, "k")
			require.ErrorIs(t, h.s.Resolve(h.ctx, decide(h, "k", old.Token)), store.ErrNotIndeterminate)
			assertRecord(t, fresh, h.lookup(t, "k"))
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: fresh.Token, Reason: "again"}))
			require.ErrorIs(t, h.s.Resolve(h.ctx, decide(h, "k", old.Token)), store.ErrNotHolder)
			assert.Equal(t, store.StateIndeterminate, h.lookup(t, "k").State)
		}},
		{"DecidesAStandingRecordAsUsual", func(t *testing.T, h *harness) {
			rec := h.indeterminate(t, "k", "r")
			require.NoError(t, h.s.Resolve(h.ctx, decide(h, "k", rec.Token)))
			got := h.lookup(t, "k")
			assert.Equal(t, rec.Token, got.Token, "the record decided on, not a new one")
			assert.Equal(t, rec.Holder, got.Holder)
			assertOutcome(t, []byte("booked"), got.Outcome)
		}},
		{"OnlyWithComplete", func(t *testing.T, h *harness) {
			p := decide(h, "k", 0)
			p.Decision = store.ActionFree
			require.ErrorIs(t, h.s.Resolve(h.ctx, p), store.ErrInvalid)
			h.requireMissing(t, h.tenant, "k")
		}},
	}
}
