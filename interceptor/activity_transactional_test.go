package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// commitMode is what a fake transaction's Commit does.
type commitMode int

const (
	commitLands         commitMode = iota // completes the record, answers
	commitLandsLost                       // completes the record, the answer is lost
	commitDoesNotLand                     // changes nothing, fails as unreachable
	commitFenced                          // the claim was taken over
	commitLeavesPending                   // a commit still in flight: nothing yet, the answer is lost
)

// txStore is the faulty memory store with a fake transactional capability:
// its transactions hold nothing, and Commit does what mode says to the
// record, as a database would. It stands in for no server: the dispatcher's
// recovery after a commit is what is under test.
type txStore struct {
	*faultyStore
	mode commitMode
}

func (s *txStore) CheckTransactional(any) error { return nil }

func (s *txStore) BeginTransaction(_ context.Context, p store.TransactionParams) (store.Transaction, error) {
	return &fakeTxn{s: s, p: p}, nil
}

type fakeTxn struct {
	s *txStore
	p store.TransactionParams
}

func (t *fakeTxn) Context(ctx context.Context) context.Context { return ctx }
func (t *fakeTxn) Rollback(context.Context) error              { return nil }

func (t *fakeTxn) Commit(ctx context.Context, outcome []byte) error {
	complete := func() error {
		return t.s.Memory.Complete(ctx, store.CompleteParams{Tenant: t.p.Tenant, Key: t.p.Key, Token: t.p.Token, Outcome: outcome})
	}
	switch t.s.mode {
	case commitLands:
		return complete()
	case commitLandsLost:
		if err := complete(); err != nil {
			return err
		}
		return store.Unavailable("fake commit", errors.New("answer lost"))
	case commitFenced:
		return fmt.Errorf("fake commit: %w", store.ErrNotHolder)
	default:
		return store.Unavailable("fake commit", errors.New("connection reset"))
	}
}

func newTxHarness(t *testing.T, mode commitMode) (*harness, *txStore) {
	t.Helper()
	mem, err := store.NewMemory(store.MemoryOptions{PollInterval: time.Millisecond})
	require.NoError(t, err)
	txs := &txStore{faultyStore: &faultyStore{Memory: mem}, mode: mode}
	h := newHarness(t, func(o *interceptor.Options) { o.Store = txs })
	require.NoError(t, h.ic.Declare(activity.Transactional(h.acts.Plain, "flight")))
	return h, txs
}

func requireErrorType(t *testing.T, err error, typ string) {
	t.Helper()
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "want an application error of type %s, got %v", typ, err)
	assert.Equal(t, typ, ae.Type(), "%v", err)
	assert.False(t, ae.NonRetryable(), "%s must be retryable", typ)
	_, indeterminate := activity.AsIndeterminate(err)
	assert.False(t, indeterminate, "a transactional activity ended indeterminate")
}

// After a commit fails or loses its answer, the dispatcher settles it by
// the record with a fenced release, and a store that cannot be reached
// then frees nothing: a commit that landed is never undone, one that did
// not is left pending for the retry to take over.
func TestTransactionalCommitRecovery(t *testing.T) {
	t.Parallel()
	req := BookRequest{Flight: "BA117"}
	for _, c := range []struct {
		name        string
		mode        commitMode
		releaseDown bool
		errType     string      // "" when the call answers
		state       store.State // what the record holds after
		kind        interceptor.EventKind
	}{
		{"Lands", commitLands, false, "", store.StateCompleted, interceptor.EventCompleted},
		{"LandsAnswerLost", commitLandsLost, false, "", store.StateCompleted, interceptor.EventCompleted},
		{"DoesNotLand", commitDoesNotLand, false, decision.ErrorTypeNotCommitted, 0, interceptor.EventReleased},
		{"Fenced", commitFenced, false, decision.ErrorTypeSuperseded, store.StatePending, interceptor.EventSuperseded},
		{"LandsAnswerLostStoreDown", commitLandsLost, true, decision.ErrorTypeStoreUnavailable, store.StateCompleted, interceptor.EventStoreError},
		{"DoesNotLandStoreDown", commitDoesNotLand, true, decision.ErrorTypeStoreUnavailable, store.StatePending, interceptor.EventStoreError},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, txs := newTxHarness(t, c.mode)
			if c.releaseDown {
				txs.setDown("Release", true)
			}
			env := h.activityEnv(t, "acme")
			val, err := env.ExecuteActivity(h.acts.Plain, req)
			if c.errType == "" {
				require.NoError(t, err)
				var b Booking
				require.NoError(t, val.Get(&b))
				assert.Equal(t, 1, b.Call)
			} else {
				requireErrorType(t, err, c.errType)
			}
			if c.releaseDown {
				// The body ran and its commit's fate is unknown: the
				// retry is safe (its claim finds the record), but the
				// details must not say that nothing ran.
				n, ok := activity.AsNotRun(err)
				require.True(t, ok)
				assert.True(t, n.BodyEntered, "the body ran")
				assert.True(t, n.EffectMayHaveLanded, "its commit may have landed")
				assert.True(t, n.MayRetry)
				assert.NotContains(t, err.Error(), "ran nothing")
			}
			assert.Equal(t, 1, h.acts.ledger.count("Plain"))
			assert.Positive(t, h.rec.count(c.kind), "events: %v", h.rec.kinds())
			assert.Zero(t, h.rec.count(interceptor.EventIndeterminate))

			claimed := h.rec.first(t, interceptor.EventClaimed)
			rec, lerr := txs.Memory.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: claimed.Key})
			if c.state == 0 {
				require.ErrorIs(t, lerr, store.ErrNotFound, "the key was not freed")
				return
			}
			require.NoError(t, lerr)
			assert.Equal(t, c.state, rec.State, "a recovery changed what the commit left")
		})
	}
}

// A body that fails rolls back and frees the key; the retry runs it once
// more and its commit lands. Never indeterminate.
func TestTransactionalBodyFailureFreesTheKey(t *testing.T) {
	t.Parallel()
	h, _ := newTxHarness(t, commitLands)
	h.acts.on("Plain", func(_ context.Context, call int, _ BookRequest) error {
		if call == 1 {
			return errors.New("downstream refused")
		}
		return nil
	})
	env := h.activityEnv(t, "acme")
	_, err := env.ExecuteActivity(h.acts.Plain, BookRequest{Flight: "BA117"})
	require.ErrorContains(t, err, "downstream refused")
	_, indeterminate := activity.AsIndeterminate(err)
	assert.False(t, indeterminate)
	assert.Equal(t, 1, h.rec.count(interceptor.EventReleased))
	val, err := env.ExecuteActivity(h.acts.Plain, BookRequest{Flight: "BA117"})
	require.NoError(t, err)
	var b Booking
	require.NoError(t, val.Get(&b))
	assert.Equal(t, 2, b.Call)
}

// A transactional execution that takes a key over from a lost holder runs
// the body again only when that holder was transactional too: its writes
// rolled back with its transaction, or committed with the record. A holder
// that was not — an attempt of the activity made before its declaration
// became Transactional, by a worker of the earlier rollout — wrote its
// effect outside any transaction and may have landed it, so the key is
// marked indeterminate, as for any EFFECTFUL activity, and the body does
// not run a second time.
func TestTransactionalTakeoverOfALostHolder(t *testing.T) {
	t.Parallel()
	req := BookRequest{Flight: "BA117"}
	decl := activity.Transactional((&acts{}).Plain, "flight")

	t.Run("NotTransactional", func(t *testing.T) {
		t.Parallel()
		h, txs := newTxHarness(t, commitLands)
		env := h.activityEnv(t, "acme")
		runID, _ := h.runIDs(t, env)
		key, err := decl.Key("acme", runID, []any{req})
		require.NoError(t, err)
		// The earlier release's attempt: claimed, applied its effect,
		// died before recording it. Its lease runs out at once.
		lost, err := txs.Memory.Claim(context.Background(), store.ClaimParams{Tenant: "acme", Key: string(key),
			Holder: "0123456789abcdef:1:worker-of-the-earlier-release", Lease: time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, lost.Status)
		time.Sleep(time.Until(lost.Record.LeaseUntil) + time.Millisecond)

		_, err = env.ExecuteActivity(h.acts.Plain, req)
		requireIndeterminate(t, err, activity.ReasonHolderLost, false)
		assert.Zero(t, h.acts.ledger.count("Plain"), "the body ran again over a lost holder that may have landed its effect")
		rec, err := txs.Memory.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: string(key)})
		require.NoError(t, err)
		assert.Equal(t, store.StateIndeterminate, rec.State)
	})

	// The rollout sequence: attempt 1 ran outside any transaction, on a
	// worker of the earlier rollout, and died; attempt 2, transactional,
	// took the key over to mark it and its mark never landed (its worker
	// died); attempt 3 finds attempt 2's claim gone. Attempt 2's holder was
	// transactional code, but the record it held was not clean: attempt 3
	// must mark it too, not run the body a second time.
	t.Run("TakenOverToMarkAndTheMarkLost", func(t *testing.T) {
		t.Parallel()
		h, txs := newTxHarness(t, commitLands)
		env := h.activityEnv(t, "acme")
		runID, _ := h.runIDs(t, env)
		key, err := decl.Key("acme", runID, []any{req})
		require.NoError(t, err)
		lost, err := txs.Memory.Claim(context.Background(), store.ClaimParams{Tenant: "acme", Key: string(key),
			Holder: "0123456789abcdef:1:worker-of-the-earlier-release", Lease: time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, lost.Status)
		time.Sleep(time.Until(lost.Record.LeaseUntil) + time.Millisecond)

		txs.setDown("MarkIndeterminate", true) // attempt 2's worker dies before its mark lands
		_, err = env.ExecuteActivity(h.acts.Plain, req)
		requireIndeterminate(t, err, activity.ReasonHolderLost, false)
		rec, err := txs.Memory.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: string(key)})
		require.NoError(t, err)
		require.Equal(t, store.StatePending, rec.State, "the mark must not have landed for this test")
		require.NotEqual(t, lost.Record.Token, rec.Token, "attempt 2 took the key over")
		time.Sleep(time.Until(rec.LeaseUntil) + time.Millisecond)

		_, err = env.ExecuteActivity(h.acts.Plain, req)
		requireIndeterminate(t, err, activity.ReasonHolderLost, false)
		assert.Zero(t, h.acts.ledger.count("Plain"),
			"the body ran over a key whose first holder applied its effect outside a transaction")
	})

	// On a durable store a takeover whose answer is lost is undone by
	// ending its lease: the record then names the taker. The same attempt
	// claims again, finds the taker's claim gone and takes it over: that
	// is still the key attempt 1 may have landed its effect under.
	t.Run("TakeoverUndone", func(t *testing.T) {
		t.Parallel()
		h, txs := newTxHarness(t, commitLands)
		env := h.activityEnv(t, "acme")
		runID, _ := h.runIDs(t, env)
		key, err := decl.Key("acme", runID, []any{req})
		require.NoError(t, err)
		lost, err := txs.Memory.Claim(context.Background(), store.ClaimParams{Tenant: "acme", Key: string(key),
			Holder: "0123456789abcdef:1:worker-of-the-earlier-release", Lease: time.Millisecond})
		require.NoError(t, err)
		time.Sleep(time.Until(lost.Record.LeaseUntil) + time.Millisecond)

		txs.undoNextTakeovers(1)
		_, err = env.ExecuteActivity(h.acts.Plain, req)
		requireIndeterminate(t, err, activity.ReasonHolderLost, false)
		assert.Zero(t, h.acts.ledger.count("Plain"),
			"the body ran over an undone takeover of a holder that may have landed its effect")
		rec, err := txs.Memory.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: string(key)})
		require.NoError(t, err)
		assert.Equal(t, store.StateIndeterminate, rec.State)
	})

	t.Run("Transactional", func(t *testing.T) {
		t.Parallel()
		// A transactional attempt whose commit did not land, and whose
		// key could not be freed: its claim stands, its writes rolled back.
		h, txs := newTxHarness(t, commitDoesNotLand)
		txs.setDown("Release", true)
		env := h.activityEnv(t, "acme")
		_, err := env.ExecuteActivity(h.acts.Plain, req)
		requireErrorType(t, err, decision.ErrorTypeStoreUnavailable)
		claimed := h.rec.first(t, interceptor.EventClaimed)
		rec, err := txs.Memory.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: claimed.Key})
		require.NoError(t, err)
		require.Equal(t, store.StatePending, rec.State)
		time.Sleep(time.Until(rec.LeaseUntil) + time.Millisecond)

		// The next attempt takes it over and runs the body again.
		txs.setDown("Release", false)
		txs.mode = commitLands
		val, err := env.ExecuteActivity(h.acts.Plain, req)
		require.NoError(t, err)
		var b Booking
		require.NoError(t, val.Get(&b))
		assert.Equal(t, 2, b.Call)
		assert.Zero(t, h.rec.count(interceptor.EventIndeterminate))
	})
}
