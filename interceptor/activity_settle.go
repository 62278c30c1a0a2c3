package interceptor

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/store"
)

// settleHow is how a claim this execution holds is settled once its body,
// or the probe asked about its unknown outcome, has returned.
type settleHow uint8

const (
	settleRecord  settleHow = iota + 1 // record the result: the call completed
	settleFailure                      // record a definite failure, answered to every duplicate
	settleRelease                      // free the key: nothing that matters landed
	settleMark                         // mark the key indeterminate: nobody can state the outcome
)

// settlement is what settle writes under the claim.
type settlement struct {
	how      settleHow
	payloads *commonpb.Payloads // settleRecord: the result
	// cause is the body's definite failure (settleFailure), why the key
	// is freed (settleRelease) or why the outcome is unknown (settleMark).
	cause   error
	reason  activity.Reason // settleMark
	entered bool            // settleMark: whether the body was entered
}

// settle writes s under the claim: the one place where a claim this
// execution holds is settled, for every kind of body — plain (runBody),
// probed (unknownOutcome) and transactional (runTransactional, whose
// record otherwise commits with its transaction). A write the store does
// not take is retried in the background (settleLater). Settling a record,
// a failure or a release reports the call's end state (EventCompleted,
// EventReleased or EventOrphaned, Final); a mark is followed by the
// indeterminate end the caller reports (markIndeterminate).
func (x *execution) settle(ctx context.Context, s settlement) {
	switch s.how {
	case settleRecord:
		x.record(ctx, s.payloads)
	case settleFailure:
		x.recordFailure(ctx, s.cause)
	case settleRelease:
		x.release(ctx, s.cause)
	case settleMark:
		x.markUnknown(ctx, s.reason, s.cause)
	default:
		panic(fmt.Sprintf("idempotency: unknown settlement %d", s.how))
	}
}

// record stores the outcome under the claim, retrying briefly. If the store
// stays down the result is still returned: the effect happened, and Temporal
// records it durably in the workflow's history.
func (x *execution) record(ctx context.Context, payloads *commonpb.Payloads) {
	var outcome []byte
	if payloads != nil {
		var err error
		if outcome, err = proto.Marshal(payloads); err != nil {
			x.orphaned(ctx, err, true)
			return
		}
	}
	complete := func(ctx context.Context) error {
		return x.opts.Store.Complete(ctx, store.CompleteParams{
			Tenant: x.tenant, Key: x.key, Token: x.token, Outcome: outcome,
		})
	}
	// Reported Final when it ends the call; a background settlement
	// reports it after the call's end.
	completed := func(ctx context.Context) { x.observe(ctx, EventCompleted, nil) }
	// A Complete whose answer was lost and that is made again finds the
	// claim no longer pending: completed, under this token, with this
	// outcome, and by no person's decision, it is this execution's own.
	landed := func(rec store.Record, err error) bool {
		return err == nil && rec.Token == x.token && rec.State == store.StateCompleted &&
			rec.Resolution.Action == 0 && bytes.Equal(rec.Outcome, outcome)
	}
	pause := backoff.New(x.opts.RecordBackoff, 0)
	var err error
	for attempt := 0; attempt < x.opts.RecordAttempts; attempt++ {
		if attempt > 0 && !pause.Sleep(ctx) {
			// The store did not answer within StoreTimeout: a store that is
			// down, as far as this call can tell.
			x.settleLater(ctx, "recording the outcome", errors.Join(err, ctx.Err()), complete, completed, landed)
			return
		}
		err = complete(ctx)
		if err == nil || (attempt > 0 && errors.Is(err, store.ErrNotHolder) && x.settled(ctx, landed)) {
			x.endEvent(ctx, EventCompleted, "", nil)
			return
		}
		x.storeError(ctx, fmt.Errorf("recording the outcome: %w", err))
		if !retriable(err) {
			x.orphaned(ctx, err, true)
			return // retrying cannot help
		}
	}
	x.settleLater(ctx, "recording the outcome", err, complete, completed, landed)
}

// settled reports whether the key's record shows that a write of this
// execution whose answer was lost did land, by done's judgement of what
// Lookup returns. A store that cannot be read says nothing: false.
func (x *execution) settled(ctx context.Context, done func(store.Record, error) bool) bool {
	rec, err := x.opts.Store.Lookup(ctx, store.LookupParams{Tenant: x.tenant, Key: x.key})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false
	}
	return done(rec, err)
}

// settleLater handles a claim left pending after its body returned because
// the store could not take the write that settles it (write: recording the
// outcome, marking it indeterminate, freeing the key). It reports the claim
// orphaned, then keeps trying write in the background for
// Options.OrphanRetry and calls landed once it succeeds. Left alone the
// claim would stay pending until a duplicate found its lease run out — and
// after a run's last call no duplicate ever comes. The attempts are fenced
// by the claim's token: if the key was taken over meanwhile, the store
// refuses and nothing is overwritten. An attempt refused because an earlier
// one landed with its answer lost is told apart by done (see settled) and
// counts as landed.
func (x *execution) settleLater(ctx context.Context, what string, err error,
	write func(context.Context) error, landed func(context.Context), done func(store.Record, error) bool) {
	// The orphaned claim is the call's end, unless a mark was being
	// written: its indeterminate end follows (markIndeterminate).
	final := landed != nil
	if x.opts.OrphanRetry <= 0 {
		x.orphaned(ctx, fmt.Errorf("%s: %w", what, err), final)
		return
	}
	if !x.root.reserveBackground() {
		x.orphaned(ctx, fmt.Errorf("%s (not retried: the interceptor is stopped or already retries %d claims): %w",
			what, maxOrphanRetries, err), final)
		return
	}
	x.orphaned(ctx, fmt.Errorf("%s (retrying in the background): %w", what, err), final)
	// Events of the background attempts keep the activity's context values
	// (the observer may read them) but not its end.
	actx := context.WithoutCancel(ctx)
	x.root.goBackground(func(bg context.Context) {
		ctx, cancel := context.WithCancel(actx)
		defer cancel()
		stop := context.AfterFunc(bg, cancel)
		defer stop()
		x.settleInBackground(ctx, what, write, landed, done)
	})
}

func (x *execution) settleInBackground(ctx context.Context, what string,
	write func(context.Context) error, landed func(context.Context), done func(store.Record, error) bool) {
	ctx, cancel := context.WithTimeout(ctx, x.opts.OrphanRetry)
	defer cancel()
	pause := backoff.New(x.opts.RecordBackoff, backoff.MaxBackgroundPause)
	for {
		if !pause.Sleep(ctx) {
			return
		}
		sctx, scancel := context.WithTimeout(ctx, x.opts.StoreTimeout)
		err := write(sctx)
		if err != nil && errors.Is(err, store.ErrNotHolder) && x.settled(sctx, done) {
			err = nil // an earlier attempt landed; its answer was lost
		}
		scancel()
		switch {
		case err == nil:
			x.count(metricname.OrphansRecorded)
			if landed != nil {
				landed(ctx)
			}
			return
		case !retriable(err):
			x.storeError(ctx, fmt.Errorf("%s, in the background: %w", what, err))
			return
		}
	}
}

// retriable reports whether a failed store write may succeed if made again:
// not when the claim is no longer the caller's, nor when the store refuses
// the write itself.
func retriable(err error) bool {
	return !errors.Is(err, store.ErrNotHolder) && !errors.Is(err, store.ErrInvalid)
}

// orphaned reports a claim the store could not settle when the call ended;
// final says whether it is the call's end state.
func (x *execution) orphaned(ctx context.Context, err error, final bool) {
	e := x.event
	e.Kind, e.Err, e.Final = EventOrphaned, err, final
	x.count(metricname.Orphaned)
	x.emit(ctx, e)
}

// release frees the key: nothing of the body landed, or nothing that
// matters. It reports the call's end (EventReleased, or EventOrphaned when
// the store does not take it and it is retried in the background).
func (x *execution) release(ctx context.Context, cause error) { x.releaseAs(ctx, cause, true) }

// releaseOnTheWay frees the key on the way to another end state, which the
// caller reports.
func (x *execution) releaseOnTheWay(ctx context.Context, cause error) { x.releaseAs(ctx, cause, false) }

func (x *execution) releaseAs(ctx context.Context, cause error, final bool) {
	release := func(ctx context.Context) error {
		return x.opts.Store.Release(ctx, store.ReleaseParams{Tenant: x.tenant, Key: x.key, Token: x.token})
	}
	report := func(ctx context.Context, final bool) {
		e := x.event
		e.Kind, e.Err, e.Final = EventReleased, cause, final
		x.emit(ctx, e)
	}
	// A background settlement reports after the call's end: not Final.
	released := func(ctx context.Context) { report(ctx, false) }
	// A release whose answer was lost left the key free. (A key claimed
	// again since reads as not freed: the retry settles that, fenced.)
	freed := func(_ store.Record, err error) bool { return errors.Is(err, store.ErrNotFound) }
	err := release(ctx)
	if err == nil {
		report(ctx, final)
		return
	}
	// The claim stays pending until the store answers again or its lease
	// runs out; the retry, an attempt of this same activity, waits for
	// either.
	x.storeError(ctx, fmt.Errorf("releasing the claim: %w", err))
	switch {
	case !retriable(err):
	case x.settled(ctx, freed):
		report(ctx, final) // it landed; only its answer was lost
	case final:
		x.settleLater(ctx, "releasing the claim", err, release, released, freed)
	default:
		// Retried in the background as a mark is: the caller's end state
		// follows, and the release landing later is counted.
		x.settleLater(ctx, "releasing the claim", err, release, nil, freed)
	}
}

// markIndeterminate keeps the claim, records that its outcome is unknown
// and returns the indeterminate error.
func (x *execution) markIndeterminate(ctx context.Context, reason activity.Reason, entered bool, cause error) error {
	x.settle(ctx, settlement{how: settleMark, reason: reason, entered: entered, cause: cause})
	return x.indeterminate(ctx, reason, entered, cause)
}

// markUnknown records that the claim's outcome is unknown. If the store cannot be
// reached the mark is made in the background once it answers again
// (Options.OrphanRetry); until then the claim stays pending, and a
// duplicate that finds its lease run out declares the holder lost, which
// ends the same way.
func (x *execution) markUnknown(ctx context.Context, reason activity.Reason, cause error) {
	mark := func(ctx context.Context) error {
		return x.opts.Store.MarkIndeterminate(ctx, store.MarkIndeterminateParams{
			Tenant: x.tenant, Key: x.key, Token: x.token, Reason: string(reason) + ": " + cause.Error(),
		})
	}
	// A mark whose answer was lost left the record indeterminate under
	// this token, which only this execution holds.
	marked := func(rec store.Record, err error) bool {
		return err == nil && rec.Token == x.token && rec.State == store.StateIndeterminate
	}
	if err := mark(ctx); err != nil {
		x.storeError(ctx, fmt.Errorf("marking the claim indeterminate: %w", err))
		if retriable(err) && !x.settled(ctx, marked) {
			// The indeterminate event that follows already reports the
			// call; the mark landing later is counted, not reported again.
			x.settleLater(ctx, "marking the claim indeterminate", err, mark, nil, marked)
		}
	}
}
