package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// Transactional is what [RunTransactor] needs from a store that implements
// [store.Transactor]: the store, and a way to make and count an effect in
// the store's own database, as an activity's body would.
type Transactional struct {
	// Store is the store under test; it must implement [store.Transactor].
	Store store.Store
	// Write makes one effect named tag through the transaction ctx carries
	// (the context [store.Transaction.Context] returned), as a body does.
	// Given a context that carries no transaction it must fail and write
	// nothing.
	Write func(ctx context.Context, tag string) error
	// Effects counts the committed effects named tag, read outside any
	// transaction.
	Effects func(t *testing.T, tag string) int
}

// RunTransactor proves that a store keeps the [store.Transactor] contract:
// the body's writes and the completed record commit together or not at all,
// fenced by the claim's token. It calls newStore once per case, like [Run];
// each case names its effects apart, so the stores may share the database
// that holds them.
//
// The cases: a commit lands the record and the effect together; a rollback
// lands neither and leaves the claim pending for the caller to release; a
// commit whose claim was taken over, released, completed or marked is
// refused with store.ErrNotHolder and lands nothing, while the new holder's
// commit lands; a holder whose lease ran out but that nobody took over
// still commits; a duplicate waiting on the claim is woken with the
// committed outcome; a write outside the transaction's context fails;
// malformed parameters are refused with store.ErrInvalid; CheckTransactional
// accepts no named handle.
func RunTransactor(t *testing.T, newStore func(t *testing.T, cfg Config) Transactional) {
	t.Helper()
	for _, c := range transactorCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock(time.Now().UTC().Truncate(time.Millisecond))
			tx := newStore(t, Config{Clock: clock, TTL: DefaultTestTTL})
			require.NotNil(t, tx.Store, "newStore returned a nil store")
			tr, ok := tx.Store.(store.Transactor)
			require.True(t, ok, "%T does not implement store.Transactor", tx.Store)
			h := &harness{s: tx.Store, clock: clock, ttl: DefaultTestTTL, lease: DefaultTestLease,
				tenant: "tenant-a", ctx: t.Context()}
			c.run(t, &txHarness{harness: h, tr: tr, tx: tx, tag: t.Name()})
		})
	}
}

type txHarness struct {
	*harness
	tr  store.Transactor
	tx  Transactional
	tag string // unique to the case
}

type txCase struct {
	name string
	run  func(t *testing.T, h *txHarness)
}

// begin opens a transaction for rec's claim and makes the effect tag in it.
func (h *txHarness) begin(t *testing.T, rec store.Record, tag string) store.Transaction {
	t.Helper()
	txn, err := h.tr.BeginTransaction(h.ctx, store.TransactionParams{Tenant: rec.Tenant, Key: rec.Key, Token: rec.Token})
	require.NoError(t, err)
	t.Cleanup(func() { _ = txn.Rollback(context.Background()) })
	require.NoError(t, h.tx.Write(txn.Context(h.ctx), tag))
	return txn
}

func transactorCases() []txCase {
	return []txCase{
		{"CommitLandsBoth", func(t *testing.T, h *txHarness) {
			rec := h.acquire(t, "k")
			txn := h.begin(t, rec, h.tag)
			assert.Zero(t, h.tx.Effects(t, h.tag), "an effect is visible before its commit")
			assert.Equal(t, store.StatePending, h.lookup(t, "k").State, "the record before the commit")
			require.NoError(t, txn.Commit(h.ctx, []byte("outcome")))
			got := h.lookup(t, "k")
			assert.Equal(t, store.StateCompleted, got.State)
			assert.Equal(t, rec.Token, got.Token)
			assertOutcome(t, []byte("outcome"), got.Outcome)
			assert.Equal(t, 1, h.tx.Effects(t, h.tag))
			assert.NoError(t, txn.Rollback(h.ctx), "a rollback after the commit")
			assert.Equal(t, 1, h.tx.Effects(t, h.tag), "a rollback after the commit undid it")
		}},
		{"CommitKeepsOwnRetention", func(t *testing.T, h *txHarness) {
			// A record claimed with a retention window of its own keeps
			// it when the transaction completes it, as Complete does.
			rec := h.claimKept(t, "k", 10*time.Minute)
			h.clock.Advance(30 * time.Second)
			done := h.clock.Now()
			require.NoError(t, h.begin(t, rec, h.tag).Commit(h.ctx, []byte("x")))
			assertTime(t, done.Add(10*time.Minute), h.lookup(t, "k").ExpiresAt, "ExpiresAt after the commit")
			h.clock.Advance(10*time.Minute + time.Second)
			h.requireMissing(t, h.tenant, "k")
		}},
		{"EmptyOutcome", func(t *testing.T, h *txHarness) {
			rec := h.acquire(t, "k")
			require.NoError(t, h.begin(t, rec, h.tag).Commit(h.ctx, nil))
			got := h.lookup(t, "k")
			assert.Equal(t, store.StateCompleted, got.State)
			assert.Empty(t, got.Outcome)
		}},
		{"RollbackLandsNothing", func(t *testing.T, h *txHarness) {
			rec := h.acquire(t, "k")
			txn := h.begin(t, rec, h.tag)
			require.NoError(t, txn.Rollback(h.ctx))
			assert.Zero(t, h.tx.Effects(t, h.tag))
			got := h.lookup(t, "k")
			assert.Equal(t, store.StatePending, got.State, "a rollback leaves the claim to its caller")
			assert.Equal(t, rec.Token, got.Token)
			require.NoError(t, h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: "k", Token: rec.Token}))
		}},
		{"TakenOverZombieRollsBack", func(t *testing.T, h *txHarness) {
			rec := h.acquire(t, "k")
			zombie := h.begin(t, rec, h.tag+"/zombie")
			h.clock.Advance(h.lease + time.Second)
			res, err := h.s.Claim(h.ctx, store.ClaimParams{Tenant: h.tenant, Key: "k", Holder: "new", Lease: h.lease, Supersede: rec.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			holder := h.begin(t, res.Record, h.tag+"/holder")

			err = zombie.Commit(h.ctx, []byte("zombie"))
			require.ErrorIs(t, err, store.ErrNotHolder)
			assert.Zero(t, h.tx.Effects(t, h.tag+"/zombie"), "the zombie's effect landed")
			got := h.lookup(t, "k")
			assert.Equal(t, store.StatePending, got.State)
			assert.Equal(t, res.Record.Token, got.Token, "the zombie's commit changed the new holder's record")

			require.NoError(t, holder.Commit(h.ctx, []byte("holder")))
			assert.Equal(t, 1, h.tx.Effects(t, h.tag+"/holder"))
			got = h.lookup(t, "k")
			assert.Equal(t, store.StateCompleted, got.State)
			assertOutcome(t, []byte("holder"), got.Outcome)
		}},
		{"FenceRefusesSettledClaims", func(t *testing.T, h *txHarness) {
			settle := map[string]func(rec store.Record) error{
				"Released": func(rec store.Record) error {
					return h.s.Release(h.ctx, store.ReleaseParams{Tenant: h.tenant, Key: rec.Key, Token: rec.Token})
				},
				"Completed": func(rec store.Record) error {
					return h.s.Complete(h.ctx, store.CompleteParams{Tenant: h.tenant, Key: rec.Key, Token: rec.Token, Outcome: []byte("other")})
				},
				"Marked": func(rec store.Record) error {
					return h.s.MarkIndeterminate(h.ctx, store.MarkIndeterminateParams{Tenant: h.tenant, Key: rec.Key, Token: rec.Token, Reason: "r"})
				},
			}
			for name, do := range settle {
				rec := h.acquire(t, name)
				txn := h.begin(t, rec, h.tag+"/"+name)
				require.NoError(t, do(rec))
				before, err := h.s.Lookup(h.ctx, store.LookupParams{Tenant: h.tenant, Key: name})
				if err != nil {
					require.ErrorIs(t, err, store.ErrNotFound)
				}
				require.ErrorIs(t, txn.Commit(h.ctx, []byte("late")), store.ErrNotHolder, name)
				assert.Zero(t, h.tx.Effects(t, h.tag+"/"+name), "%s: the effect landed", name)
				after, err := h.s.Lookup(h.ctx, store.LookupParams{Tenant: h.tenant, Key: name})
				if err != nil {
					require.ErrorIs(t, err, store.ErrNotFound)
				}
				assert.Equal(t, before.State, after.State, "%s: the refused commit changed the record", name)
				assert.Equal(t, before.Outcome, after.Outcome, name)
			}
		}},
		{"LeaseRunOutStillCommits", func(t *testing.T, h *txHarness) {
			rec := h.acquire(t, "k")
			txn := h.begin(t, rec, h.tag)
			h.clock.Advance(h.lease + time.Second)
			require.NoError(t, txn.Commit(h.ctx, []byte("late but alone")))
			assert.Equal(t, 1, h.tx.Effects(t, h.tag))
			assert.Equal(t, store.StateCompleted, h.lookup(t, "k").State)
		}},
		{"DuplicateWaitsForTheCommit", func(t *testing.T, h *txHarness) {
			rec := h.acquire(t, "k")
			txn := h.begin(t, rec, h.tag)
			res := h.claim(t, "k", "duplicate")
			require.Equal(t, store.StatusHeld, res.Status)
			wait := h.waitAsync(t, store.WaitParams{Tenant: h.tenant, Key: "k", Token: rec.Token})
			require.NoError(t, txn.Commit(h.ctx, []byte("answer")))
			got, err := wait()
			require.NoError(t, err)
			require.Equal(t, store.StatusCompleted, got.Status)
			assertOutcome(t, []byte("answer"), got.Record.Outcome)
			assert.Equal(t, 1, h.tx.Effects(t, h.tag))
		}},
		{"WriteOutsideTheTransactionFails", func(t *testing.T, h *txHarness) {
			assert.Error(t, h.tx.Write(h.ctx, h.tag))
			assert.Zero(t, h.tx.Effects(t, h.tag))
		}},
		{"Validation", func(t *testing.T, h *txHarness) {
			for name, p := range map[string]store.TransactionParams{
				"NoTenant": {Key: "k", Token: 1},
				"NoKey":    {Tenant: h.tenant, Token: 1},
				"NoToken":  {Tenant: h.tenant, Key: "k"},
			} {
				_, err := h.tr.BeginTransaction(h.ctx, p)
				assert.ErrorIs(t, err, store.ErrInvalid, name)
			}
		}},
		{"CheckTransactionalNil", func(t *testing.T, h *txHarness) {
			assert.NoError(t, h.tr.CheckTransactional(nil))
			err := h.tr.CheckTransactional(struct{}{})
			assert.True(t, errors.Is(err, store.ErrNotTransactional), "a handle that is not the store's: %v", err)
		}},
	}
}
