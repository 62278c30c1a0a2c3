package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// staleCases cover ResolveParams.Stale: a person settles a pending record
// whose holder let its lease run out, in one fenced step.
func staleCases() []testCase {
	// stale claims key with an origin and lets its lease run out.
	stale := func(t *testing.T, h *harness, key string) store.Record {
		t.Helper()
		res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: key, Holder: "dead-worker", Lease: h.lease,
			Origin: store.Origin{WorkflowID: "booking-42", RunID: "run-1", ActivityType: "BookSeat", ActivityID: "5", Attempt: 3}})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status)
		h.clock.Advance(h.lease + time.Second)
		return res.Record
	}
	decide := func(h *harness, key string, d store.Action, token int64) store.ResolveParams {
		return store.ResolveParams{Tenant: h.tenant, Key: key, Decision: d, Outcome: []byte("booked"), Token: token, Stale: true,
			By: "alice@ops", Reason: "the airline has the booking", Reference: "PNR ABC123"}
	}
	return []testCase{
		{"CompleteSettlesInOneStep", func(t *testing.T, h *harness) {
			rec := stale(t, h, "k")
			now := h.clock.Now()
			require.NoError(t, h.s.Resolve(h.ctx, decide(h, "k", store.ActionComplete, rec.Token)))
			got := h.lookup(t, "k")
			assert.Equal(t, store.StateCompleted, got.State)
			assertOutcome(t, []byte("booked"), got.Outcome)
			assert.Equal(t, rec.Token, got.Token, "the record keeps the token it was decided by")
			assert.Equal(t, "dead-worker", got.Holder, "and its holder")
			assert.Equal(t, rec.Origin, got.Origin, "and its origin")
			assertTime(t, rec.CreatedAt, got.CreatedAt, "CreatedAt")
			assertTime(t, now, got.UpdatedAt, "UpdatedAt")
			assertTime(t, now.Add(h.ttl), got.ExpiresAt, "ExpiresAt")
			r := got.Resolution
			assert.Equal(t, store.ActionComplete, r.Action)
			assert.Equal(t, "alice@ops", r.By)
			assert.Equal(t, "the airline has the booking", r.Reason)
			assert.Equal(t, "PNR ABC123", r.Reference)
			assertTime(t, now, r.At, "Resolution.At")

			res := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusCompleted, res.Status, "a duplicate gets the person's outcome")
			assertOutcome(t, []byte("booked"), res.Record.Outcome)
			w, err := h.wait(t, store.WaitParams{Tenant: h.tenant, Key: "k", Token: rec.Token})
			require.NoError(t, err)
			assert.Equal(t, store.StatusCompleted, w.Status, "so does a waiter on the stale claim")
			for _, op := range fencedOps() {
				require.ErrorIs(t, op.call(h, h.tenant, "k", rec.Token), store.ErrNotHolder, "%s by the holder, should it come back", op.name)
			}
			assertOutcome(t, []byte("booked"), h.lookup(t, "k").Outcome)
		}},
		{"FreeSettlesInOneStep", func(t *testing.T, h *harness) {
			rec := stale(t, h, "k")
			require.NoError(t, h.s.Resolve(h.ctx, decide(h, "k", store.ActionFree, rec.Token)))
			h.requireMissing(t, h.tenant, "k")
			w, err := h.wait(t, store.WaitParams{Tenant: h.tenant, Key: "k", Token: rec.Token})
			require.NoError(t, err)
			assert.Equal(t, store.StatusFree, w.Status)
			require.ErrorIs(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("late")}),
				store.ErrNotHolder, "the holder, should it come back")
			again := h.acquire(t, "k")
			assert.NotEqual(t, rec.Token, again.Token)
		}},
		{"LeaseLiveRefused", func(t *testing.T, h *harness) {
			rec := h.acquire(t, "k")
			h.clock.Advance(h.lease - time.Second)
			for _, d := range []store.Action{store.ActionComplete, store.ActionFree} {
				err := h.s.Resolve(h.ctx, decide(h, "k", d, rec.Token))
				require.ErrorIs(t, err, store.ErrLeaseLive, "Resolve(%v) within the holder's lease", d)
			}
			assertRecord(t, rec, h.lookup(t, "k"))
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Outcome: []byte("mine")}),
				"the live holder keeps its claim")
		}},
		{"LeaseRunsOutAtItsDeadline", func(t *testing.T, h *harness) {
			// The moment a claim reports LeaseExpired is the moment a
			// person may settle it: one clock, one rule.
			rec := h.acquire(t, "k")
			h.clock.Set(rec.LeaseUntil)
			res := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusHeld, res.Status)
			require.True(t, res.LeaseExpired)
			require.NoError(t, h.s.Resolve(h.ctx, decide(h, "k", store.ActionComplete, rec.Token)))
			assert.Equal(t, store.StateCompleted, h.lookup(t, "k").State)
		}},
		{"OtherTokenRefused", func(t *testing.T, h *harness) {
			// The person looked at one claim; the key was taken over (or
			// released and claimed again) since. The decision must not
			// settle a claim nobody decided on, live or stale.
			rec := stale(t, h, "k")
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "successor", Lease: h.lease, Supersede: rec.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			successor := res.Record
			for _, advance := range []time.Duration{0, h.lease + time.Second} {
				h.clock.Advance(advance)
				for _, d := range []store.Action{store.ActionComplete, store.ActionFree} {
					err := h.s.Resolve(h.ctx, decide(h, "k", d, rec.Token))
					require.ErrorIs(t, err, store.ErrNotHolder, "Resolve(%v) on the taken-over token, successor's lease run out: %v", d, advance > 0)
				}
				assertRecord(t, successor, h.lookup(t, "k"))
			}

			again := stale(t, h, "r")
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: "r", Token: again.Token}))
			newer := h.acquire(t, "r")
			h.clock.Advance(h.lease + time.Second)
			require.ErrorIs(t, h.s.Resolve(h.ctx, decide(h, "r", store.ActionFree, again.Token)), store.ErrNotHolder)
			assertRecord(t, newer, h.lookup(t, "r"))
		}},
		{"SettledRecordsRefused", func(t *testing.T, h *harness) {
			// The holder came back and settled its claim before the person
			// did: nothing is left to decide, and its outcome stands.
			done := stale(t, h, "done")
			require.NoError(t, h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: "done", Token: done.Token, Outcome: []byte("holder's")}))
			for _, d := range []store.Action{store.ActionComplete, store.ActionFree} {
				require.ErrorIs(t, h.s.Resolve(h.ctx, decide(h, "done", d, done.Token)), store.ErrNotIndeterminate, "Resolve(%v) on a completed record", d)
			}
			got := h.lookup(t, "done")
			assertOutcome(t, []byte("holder's"), got.Outcome)
			assert.Equal(t, store.Resolution{}, got.Resolution)

			freed := stale(t, h, "freed")
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: "freed", Token: freed.Token}))
			require.ErrorIs(t, h.s.Resolve(h.ctx, decide(h, "freed", store.ActionFree, freed.Token)), store.ErrNotFound)
			h.requireMissing(t, h.tenant, "freed")
		}},
		{"IndeterminateUnderTokenDecided", func(t *testing.T, h *harness) {
			// The holder marked its own claim indeterminate before the
			// person decided: the decision is about the same claim.
			rec := stale(t, h, "k")
			require.NoError(t, h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: "k", Token: rec.Token, Reason: "late"}))
			require.NoError(t, h.s.Resolve(h.ctx, decide(h, "k", store.ActionComplete, rec.Token)))
			got := h.lookup(t, "k")
			assert.Equal(t, store.StateCompleted, got.State)
			assert.Equal(t, "late", got.Reason, "the indeterminate reason stays")
			assert.Equal(t, "alice@ops", got.Resolution.By)
		}},
		{"RecordsTheOutcomeOfAGoneRecord", func(t *testing.T, h *harness) {
			rec := stale(t, h, "k")
			h.clock.Advance(h.ttl)
			p := decide(h, "k", store.ActionComplete, rec.Token)
			require.ErrorIs(t, h.s.Resolve(h.ctx, p), store.ErrNotFound)
			p.RecordIfGone = true
			require.NoError(t, h.s.Resolve(h.ctx, p))
			res := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusCompleted, res.Status)
			assertOutcome(t, []byte("booked"), res.Record.Outcome)
		}},
		{"DuplicateNeverSeesIndeterminate", func(t *testing.T, h *harness) {
			// A duplicate claiming while the person decides sees the stale
			// claim, then the decision: never a key free to run, never an
			// indeterminate record to route to a person again, never a
			// claim it waits on while the decision is being made.
			rec := stale(t, h, "k")
			var (
				wg   sync.WaitGroup
				seen = map[store.Status]int{}
				errc = make(chan error, 1)
			)
			wg.Go(func() {
				for {
					res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "duplicate", Lease: h.lease})
					if err != nil {
						errc <- err
						return
					}
					seen[res.Status]++
					if res.Status != store.StatusHeld || !res.LeaseExpired || res.Record.Token != rec.Token {
						return
					}
				}
			})
			require.NoError(t, h.s.Resolve(h.ctx, decide(h, "k", store.ActionComplete, rec.Token)))
			wg.Wait()
			select {
			case err := <-errc:
				require.NoError(t, err)
			default:
			}
			for status := range seen {
				assert.Contains(t, []store.Status{store.StatusHeld, store.StatusCompleted}, status, "the duplicate saw %v", status)
			}
			assert.Equal(t, 1, seen[store.StatusCompleted], "it ends with the person's outcome")
		}},
		{"NeedsTheToken", func(t *testing.T, h *harness) {
			stale(t, h, "k")
			err := h.s.Resolve(h.ctx, store.ResolveParams{Tenant: h.tenant, Key: "k", Decision: store.ActionFree, Stale: true})
			require.ErrorIs(t, err, store.ErrInvalid)
			var inv *store.InvalidError
			require.ErrorAs(t, err, &inv)
			assert.Equal(t, "Stale", inv.Field)
			assert.Equal(t, store.StatePending, h.lookup(t, "k").State, "nothing written")
		}},
		{"WithoutStalePendingStaysRefused", func(t *testing.T, h *harness) {
			rec := stale(t, h, "k")
			p := decide(h, "k", store.ActionComplete, rec.Token)
			p.Stale = false
			require.ErrorIs(t, h.s.Resolve(h.ctx, p), store.ErrNotIndeterminate)
			assertRecord(t, rec, h.lookup(t, "k"))
		}},
	}
}
