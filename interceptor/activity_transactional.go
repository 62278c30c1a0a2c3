package interceptor

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// TransactionalError is the refusal, by [Interceptor.Declare], of a
// transactional declaration the interceptor's store cannot honour: a store
// that does not implement [store.Transactor] (the memory and Redis stores),
// or one that does not record through the database handle the declaration
// names. It matches [store.ErrNotTransactional] and
// activity.ErrInvalidDeclaration.
type TransactionalError struct {
	// Activity is the declared activity's name.
	Activity string
	// Store is the store's type, as %T prints it.
	Store string
	// Reason says why.
	Reason string
}

// Error implements error.
func (e *TransactionalError) Error() string {
	return fmt.Sprintf("idempotency: activity %q is declared Transactional, but its store (%s) %s",
		e.Activity, e.Store, e.Reason)
}

// Is reports whether target is store.ErrNotTransactional or
// activity.ErrInvalidDeclaration.
func (e *TransactionalError) Is(target error) bool {
	return target == store.ErrNotTransactional || target == activity.ErrInvalidDeclaration
}

// checkTransactional returns the [*TransactionalError] with which
// [Interceptor.Declare] refuses d on an interceptor recording in st, or nil:
// d is not transactional, or st can run it.
func checkTransactional(st store.Store, d *activity.Declaration) error {
	if !d.IsTransactional() {
		return nil
	}
	tr, ok := st.(store.Transactor)
	if !ok {
		return &TransactionalError{Activity: d.Name(), Store: fmt.Sprintf("%T", st),
			Reason: "keeps its records outside any database the activity's body can write to, so the body's writes " +
				"and the outcome cannot commit together; record in a pgstore whose database holds the effect's tables, " +
				"or declare the activity EFFECTFUL without Transactional"}
	}
	if err := tr.CheckTransactional(d.TransactionalDB()); err != nil {
		return &TransactionalError{Activity: d.Name(), Store: fmt.Sprintf("%T", st), Reason: "refuses it: " + err.Error()}
	}
	return nil
}

// runTransactional runs the body of a transactional activity under the
// claim just taken, inside a transaction of the store's database, and
// commits the outcome with it, fenced by the claim's token. It never ends
// indeterminate: whatever happens, the record says whether the body's
// writes landed.
//
//   - the body fails or panics: the transaction rolls back, the key is
//     freed, and the error goes to the retry policy as it is;
//   - the claim is taken over while the body runs, or the commit's fence
//     finds it taken over: the transaction rolls back (the new holder's
//     effect is the one that lands) and the retryable superseded error
//     sends the retry to wait for the new holder's answer;
//   - the commit fails or its answer is lost: see settler.commitFailed.
//
// A worker that dies mid-body leaves a transaction its server rolls back
// and a pending claim whose lease runs out; the next attempt takes it over
// and runs the body again (see run).
func (x *execution) runTransactional(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	txn, err := x.beginTransaction(ctx)
	if txn == nil {
		return nil, err
	}
	run := x.runUnderLease(ctx, txn.Context(activity.WithKey(ctx, keyspace.Key(x.key))), in)
	sctx, cancel := storeContext(ctx, x.opts.StoreTimeout)
	defer cancel()
	rollback := func() {
		if rerr := txn.Rollback(sctx); rerr != nil {
			// The transaction was never asked to commit: its server rolls
			// it back when the connection goes.
			x.rep.storeError(ctx, fmt.Errorf("rolling the transaction back: %w", rerr))
		}
	}
	if run.superseded != nil {
		// The key is another caller's: this transaction must not land.
		rollback()
		x.rep.superseded(sctx, run.superseded, true)
		if run.panicked != nil {
			panic(run.panicked)
		}
		return nil, supersededError(x.decl.Name(), run.err)
	}
	outcome, err := transactionalOutcome(x.codec, run)
	if err != nil {
		// Nothing of the body lands: its transaction rolls back and the
		// key is freed for the retry.
		rollback()
		x.settler().release(sctx, err, true)
		if run.panicked != nil {
			panic(run.panicked)
		}
		return nil, err
	}
	err = txn.Commit(sctx, outcome)
	switch {
	case err == nil:
		x.rep.endEvent(ctx, EventCompleted, "", nil)
		return run.result, nil
	case errors.Is(err, store.ErrNotHolder):
		x.rep.superseded(ctx, err, true)
		return nil, supersededError(x.decl.Name(), nil)
	case errors.Is(err, store.ErrTransactionEnded):
		// The body committed or rolled back by itself: its writes may have
		// landed without the record, and nothing can tell. This is the one
		// way to an unknown outcome, and it is the body's breach of the
		// contract, not a failure.
		return nil, x.markIndeterminate(sctx, activity.ReasonBodyFailed, true, err)
	}
	switch fate, cause := x.settler().commitFailed(ctx, sctx, err, outcome); fate {
	case commitLanded:
		return run.result, nil
	case commitNotLanded:
		return nil, temporal.NewApplicationErrorWithCause(
			fmt.Sprintf("idempotency: activity %q ran, but its transaction did not commit; nothing of it landed and it will run again: %v",
				x.decl.Name(), cause), decision.ErrorTypeNotCommitted, cause)
	case commitSuperseded:
		return nil, supersededError(x.decl.Name(), nil)
	default:
		return nil, commitUnsettled(x.decl.Name(), x.identity, cause)
	}
}

// beginTransaction begins the transaction a transactional body runs in,
// or, when it cannot, frees the key (nothing ran) and returns a nil
// transaction with the error the call ends with.
func (x *execution) beginTransaction(ctx context.Context) (store.Transaction, error) {
	tr, ok := x.opts.Store.(store.Transactor)
	if !ok {
		// Declare refuses this; a declaration can only get here through a
		// store that changed type, which Options does not allow.
		sctx, cancel := storeContext(ctx, x.opts.StoreTimeout)
		defer cancel()
		cause := checkTransactional(x.opts.Store, x.decl)
		x.settler().release(sctx, cause, false)
		return nil, x.misconfigured(ctx, decision.ErrorTypeStoreUnavailable, cause)
	}
	txn, err := tr.BeginTransaction(ctx, store.TransactionParams{Tenant: x.tenant, Key: x.key, Token: x.token})
	if err == nil {
		return txn, nil
	}
	// Nothing ran: free the key for the retry.
	sctx, cancel := storeContext(ctx, x.opts.StoreTimeout)
	defer cancel()
	x.rep.storeError(ctx, fmt.Errorf("beginning the transaction: %w", err))
	x.settler().release(sctx, err, true)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, temporal.NewApplicationErrorWithCause(
		fmt.Sprintf("idempotency: activity %q was not run: its transaction could not begin: %v", x.decl.Name(), err),
		decision.ErrorTypeStoreUnavailable, err)
}

// transactionalOutcome is the outcome a transactional body's run commits,
// encoded with c, or the error for which nothing of it may: the body
// failed or panicked, or its result cannot be encoded.
func transactionalOutcome(c codec, run bodyRun) ([]byte, error) {
	switch {
	case run.panicked != nil:
		return nil, fmt.Errorf("activity panicked: %v", run.panicked)
	case run.err != nil:
		return nil, activity.UnwrapNoEffect(run.err)
	}
	payloads, err := c.encode(run.result)
	if err != nil || payloads == nil {
		return nil, err
	}
	return proto.Marshal(payloads)
}

// commitFate is what became of a commit that failed or whose answer was
// lost, as commitFailed finds out.
type commitFate uint8

const (
	commitNotLanded  commitFate = iota + 1 // it did not commit, and the key is free
	commitLanded                           // it committed; only its answer was lost
	commitSuperseded                       // the key was taken over
	commitUnknown                          // the store could not be asked
)

// commitFailed decides, by the record, what became of a commit that
// failed (cerr) or whose answer was lost, and reports it: the fate, with
// the error the call's answer names. It never reads the record bare: a
// commit still in flight holds the record's row lock (its fenced
// completion took it), and a plain read would see the row as it was
// before. It frees the key with a fenced Release instead, which waits for
// that lock:
//
//   - the release lands: the record was still pending under this token
//     once the transaction had ended, so it did not commit (and, the
//     fence being in the transaction, never can): nothing landed, the key
//     is free, and the retry runs the body again;
//   - the release is refused (not the holder): the transaction ended
//     first; the record, read back now that nothing is in flight, says
//     whether it committed (completed under this token, with this
//     outcome, as a completion's read back does: see landed) or the key
//     was taken over (superseded);
//   - the store cannot be reached: nothing is freed, so nothing a commit
//     completed can be destroyed. The retryable store error sends the
//     retry, which waits until the lease runs out and takes the key over
//     unless the record says it completed; a takeover's claim waits for the
//     row lock as the release did.
func (s settler) commitFailed(ctx, sctx context.Context, cerr error, outcome []byte) (commitFate, error) {
	s.rep.storeError(ctx, fmt.Errorf("committing the transaction: %w", cerr))
	rerr := s.opts.Store.Release(sctx, store.ReleaseParams{Tenant: s.tenant, Key: s.key, Token: s.token})
	switch {
	case rerr == nil:
		s.rep.endEvent(ctx, EventReleased, "", cerr)
		return commitNotLanded, cerr
	case errors.Is(rerr, store.ErrNotHolder):
		committed, lerr := s.readBack(sctx, s.completedWith(outcome))
		switch {
		case committed:
			s.rep.endEvent(ctx, EventCompleted, "", nil)
			return commitLanded, nil
		case lerr != nil:
			s.rep.storeError(ctx, fmt.Errorf("reading the record after the commit: %w", lerr))
			return commitUnknown, cerr
		}
		s.rep.superseded(ctx, rerr, true)
		return commitSuperseded, rerr
	default:
		s.rep.storeError(ctx, fmt.Errorf("freeing the key after the commit failed: %w", rerr))
		return commitUnknown, errors.Join(cerr, rerr)
	}
}

// commitUnsettled is the retryable error of a commit whose fate the store
// could not be asked about: the retry asks again, through its claim. It is
// of the store-unavailable type, which a workflow runs again (safe: the
// record decides), but its details say what happened — the body ran and
// its commit may have landed — not that nothing ran.
func commitUnsettled(name string, id identity, cause error) error {
	n := activity.NotRun{
		Activity: name, Tenant: id.tenant, Key: id.key, Reason: activity.ReasonStoreUnavailable,
		BodyEntered: true, EffectMayHaveLanded: true, MayRetry: true, Cause: cause.Error(),
	}
	return temporal.NewApplicationErrorWithCause(
		fmt.Sprintf("idempotency: activity %q ran, but the store could not say whether its transaction committed; "+
			"running it again is safe, the retry finds out from the record: %v", name, cause), decision.ErrorTypeStoreUnavailable, cause, n)
}

// supersededError is the retryable error of a body of activity name whose
// claim was taken over: its retry waits for the holder that took it and
// gets its answer.
func supersededError(name string, cause error) error {
	return benignError(fmt.Sprintf("idempotency: activity %q stopped: %v", name, ErrSuperseded),
		decision.ErrorTypeSuperseded, activity.UnwrapNoEffect(cause))
}

// benignError is a retryable error of Temporal's benign category (see
// decision.ErrorTypeSuperseded): the library working as designed, which the
// SDK logs at debug and leaves out of its failure metrics.
func benignError(msg, typ string, cause error) error {
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{
		Cause: cause, Category: temporal.ApplicationErrorCategoryBenign,
	})
}
