package interceptor

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
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

// settler settles the claim a call holds once its body, or the probe asked
// about its unknown outcome, has returned: it records the result or a
// definite failure, frees the key, or marks it indeterminate, under the
// claim's token. A write the store does not take is retried in the
// background (later); a write made again that the store refuses because
// an earlier one landed with its answer lost is told apart by reading the
// record back (landed). It reports what it settled; the call's answer is
// the caller's.
type settler struct {
	opts   *Options
	root   *Interceptor
	rep    *reporter
	dc     converter.DataConverter // records definite failures
	tenant string
	key    string
	token  int64
}

// settler is the settler of the claim x holds.
func (x *execution) settler() settler {
	return settler{opts: x.opts, root: x.root, rep: &x.rep, dc: x.codec.dc, tenant: x.tenant, key: x.key, token: x.token}
}

// settle writes st under the claim: the one place where a claim a call
// holds is settled, for every kind of body — plain (runBody), probed
// (unknownOutcome) and transactional (runTransactional, whose record
// otherwise commits with its transaction). Settling a record, a failure
// or a release reports the call's end state (EventCompleted,
// EventReleased or EventOrphaned, Final); a mark is followed by the
// indeterminate end the caller reports (markIndeterminate).
func (s settler) settle(ctx context.Context, st settlement) {
	switch st.how {
	case settleRecord:
		s.record(ctx, st.payloads)
	case settleFailure:
		s.recordFailure(ctx, st.cause)
	case settleRelease:
		s.release(ctx, st.cause, true)
	case settleMark:
		s.mark(ctx, st.reason, st.cause)
	default:
		panic(fmt.Sprintf("idempotency: unknown settlement %d", st.how))
	}
}

// record stores the outcome under the claim, retrying briefly. If the store
// stays down the result is still returned: the effect happened, and Temporal
// records it durably in the workflow's history.
func (s settler) record(ctx context.Context, payloads *commonpb.Payloads) {
	var outcome []byte
	if payloads != nil {
		var err error
		if outcome, err = proto.Marshal(payloads); err != nil {
			s.rep.orphaned(ctx, err, true)
			return
		}
	}
	complete := func(ctx context.Context) error {
		return s.opts.Store.Complete(ctx, store.CompleteParams{
			Tenant: s.tenant, Key: s.key, Token: s.token, Outcome: outcome,
		})
	}
	// Reported Final when it ends the call; a background settlement
	// reports it after the call's end.
	completed := func(ctx context.Context) { s.rep.observe(ctx, EventCompleted, nil) }
	done := s.completedWith(outcome)
	pause := backoff.New(s.opts.RecordBackoff, 0)
	var err error
	for attempt := 0; attempt < s.opts.RecordAttempts; attempt++ {
		if attempt > 0 && !pause.Sleep(ctx) {
			// The store did not answer within StoreTimeout: a store that is
			// down, as far as this call can tell.
			s.later(ctx, "recording the outcome", errors.Join(err, ctx.Err()), complete, completed, done)
			return
		}
		err = complete(ctx)
		if err == nil || (attempt > 0 && errors.Is(err, store.ErrNotHolder) && s.landed(ctx, done)) {
			s.rep.endEvent(ctx, EventCompleted, "", nil)
			return
		}
		s.rep.storeError(ctx, fmt.Errorf("recording the outcome: %w", err))
		if !retriable(err) {
			s.rep.orphaned(ctx, err, true)
			return // retrying cannot help
		}
	}
	s.later(ctx, "recording the outcome", err, complete, completed, done)
}

// recordFailure records err, a definite outcome of the body, as the key's
// outcome, for every duplicate to receive.
func (s settler) recordFailure(ctx context.Context, err error) {
	payloads, perr := encodeFailure(s.dc, err)
	if perr != nil {
		// The failure cannot be recorded: the key is freed, as for a
		// failure with no effect, rather than left to read as unknown.
		s.release(ctx, fmt.Errorf("recording a definite failure: %w (the failure: %w)", perr, err), true)
		return
	}
	s.record(ctx, payloads)
}

// completedWith judges a record read back after a completion with outcome
// whose answer was lost (see landed): completed, under this token, with
// this outcome, and by no person's decision, it is this claim's own.
func (s settler) completedWith(outcome []byte) func(store.Record, error) bool {
	return func(rec store.Record, err error) bool {
		return err == nil && rec.Token == s.token && rec.State == store.StateCompleted &&
			rec.Resolution.Action == 0 && bytes.Equal(rec.Outcome, outcome)
	}
}

// landed reports whether the key's record shows that a write of this
// claim whose answer was lost did land, by done's judgement of what
// Lookup returns. A store that cannot be read says nothing: false.
func (s settler) landed(ctx context.Context, done func(store.Record, error) bool) bool {
	ok, err := s.readBack(ctx, done)
	return err == nil && ok
}

// readBack is landed, with the error of a store that could not be read.
func (s settler) readBack(ctx context.Context, done func(store.Record, error) bool) (bool, error) {
	rec, err := s.opts.Store.Lookup(ctx, store.LookupParams{Tenant: s.tenant, Key: s.key})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	return done(rec, err), nil
}

// later handles a claim left pending after its body returned because the
// store could not take the write that settles it (write: recording the
// outcome, marking it indeterminate, freeing the key). It reports the claim
// orphaned, then keeps trying write in the background for
// Options.OrphanRetry and calls settled once it succeeds. Left alone the
// claim would stay pending until a duplicate found its lease run out — and
// after a run's last call no duplicate ever comes. The attempts are fenced
// by the claim's token: if the key was taken over meanwhile, the store
// refuses and nothing is overwritten. An attempt refused because an earlier
// one landed with its answer lost is told apart by done (see landed) and
// counts as landed.
func (s settler) later(ctx context.Context, what string, err error,
	write func(context.Context) error, settled func(context.Context), done func(store.Record, error) bool) {
	// The orphaned claim is the call's end, unless a mark was being
	// written: its indeterminate end follows (markIndeterminate).
	final := settled != nil
	if s.opts.OrphanRetry <= 0 {
		s.rep.orphaned(ctx, fmt.Errorf("%s: %w", what, err), final)
		return
	}
	if !s.root.reserveBackground() {
		s.rep.orphaned(ctx, fmt.Errorf("%s (not retried: the interceptor is stopped or already retries %d claims): %w",
			what, maxOrphanRetries, err), final)
		return
	}
	s.rep.orphaned(ctx, fmt.Errorf("%s (retrying in the background): %w", what, err), final)
	// Events of the background attempts keep the activity's context values
	// (the observer may read them) but not its end.
	actx := context.WithoutCancel(ctx)
	s.root.goBackground(func(bg context.Context) {
		ctx, cancel := context.WithCancel(actx)
		defer cancel()
		stop := context.AfterFunc(bg, cancel)
		defer stop()
		s.inBackground(ctx, what, write, settled, done)
	})
}

// inBackground is later's background attempts.
func (s settler) inBackground(ctx context.Context, what string,
	write func(context.Context) error, settled func(context.Context), done func(store.Record, error) bool) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OrphanRetry)
	defer cancel()
	pause := backoff.New(s.opts.RecordBackoff, backoff.MaxBackgroundPause)
	for {
		if !pause.Sleep(ctx) {
			return
		}
		sctx, scancel := context.WithTimeout(ctx, s.opts.StoreTimeout)
		err := write(sctx)
		if err != nil && errors.Is(err, store.ErrNotHolder) && s.landed(sctx, done) {
			err = nil // an earlier attempt landed; its answer was lost
		}
		scancel()
		switch {
		case err == nil:
			s.rep.count(metricname.OrphansRecorded)
			if settled != nil {
				settled(ctx)
			}
			return
		case !retriable(err):
			s.rep.storeError(ctx, fmt.Errorf("%s, in the background: %w", what, err))
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

// release frees the key: nothing of the body landed, or nothing that
// matters. With final it reports the call's end (EventReleased, or
// EventOrphaned when the store does not take it and it is retried in the
// background); without, it frees the key on the way to another end
// state, which the caller reports.
func (s settler) release(ctx context.Context, cause error, final bool) {
	release := func(ctx context.Context) error {
		return s.opts.Store.Release(ctx, store.ReleaseParams{Tenant: s.tenant, Key: s.key, Token: s.token})
	}
	report := func(ctx context.Context, final bool) {
		e := s.rep.event
		e.Kind, e.Err, e.Final = EventReleased, cause, final
		s.rep.emit(ctx, e)
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
	s.rep.storeError(ctx, fmt.Errorf("releasing the claim: %w", err))
	switch {
	case !retriable(err):
	case s.landed(ctx, freed):
		report(ctx, final) // it landed; only its answer was lost
	case final:
		s.later(ctx, "releasing the claim", err, release, released, freed)
	default:
		// Retried in the background as a mark is: the caller's end state
		// follows, and the release landing later is counted.
		s.later(ctx, "releasing the claim", err, release, nil, freed)
	}
}

// mark records that the claim's outcome is unknown. If the store cannot be
// reached the mark is made in the background once it answers again
// (Options.OrphanRetry); until then the claim stays pending, and a
// duplicate that finds its lease run out declares the holder lost, which
// ends the same way.
func (s settler) mark(ctx context.Context, reason activity.Reason, cause error) {
	mark := func(ctx context.Context) error {
		return s.opts.Store.MarkIndeterminate(ctx, store.MarkIndeterminateParams{
			Tenant: s.tenant, Key: s.key, Token: s.token, Reason: string(reason) + ": " + cause.Error(),
		})
	}
	// A mark whose answer was lost left the record indeterminate under
	// this token, which only this claim holds.
	marked := func(rec store.Record, err error) bool {
		return err == nil && rec.Token == s.token && rec.State == store.StateIndeterminate
	}
	if err := mark(ctx); err != nil {
		s.rep.storeError(ctx, fmt.Errorf("marking the claim indeterminate: %w", err))
		if retriable(err) && !s.landed(ctx, marked) {
			// The indeterminate event that follows already reports the
			// call; the mark landing later is counted, not reported again.
			s.later(ctx, "marking the claim indeterminate", err, mark, nil, marked)
		}
	}
}

// markIndeterminate keeps the claim, records that its outcome is unknown
// and returns the indeterminate error.
func (x *execution) markIndeterminate(ctx context.Context, reason activity.Reason, entered bool, cause error) error {
	x.settler().mark(ctx, reason, cause)
	return x.indeterminate(ctx, reason, entered, cause)
}
