package interceptor

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.temporal.io/sdk/interceptor"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// Step 3 of a call (see activity_call.go): execute what the claim just
// taken calls for. A plain body runs under its lease (runBody; the lease
// is activity_body.go's), a transactional one in the store's transaction
// (activity_transactional.go), and an outcome nobody can state goes to
// the probe (activity_probe.go). Each hands what it decided to the
// settler (step 4, activity_settle.go).

// execute runs what the claim just taken calls for.
func (x *execution) execute(ctx context.Context, in *interceptor.ExecuteActivityInput, lost *store.Record) (any, error) {
	if lost != nil {
		// Whether anything outside a transaction may have touched the key
		// is a fact of the record this claim now holds, kept by the holder
		// it was claimed under (see transactionalHolder). A gone holder of
		// a clean record left nothing behind: its transaction rolled back,
		// or committed the record with it. Any other may have left an
		// unknown effect.
		clean := isTransactionalHolder(x.claimHolder(x.decl.IsTransactional(), lost))
		if x.kind == activity.KindEffectful && !(x.decl.IsTransactional() && clean) {
			return x.holderLost(ctx, lost)
		}
		x.rep.observe(ctx, EventTakenOver, nil)
		x.rep.count(metricname.Takeovers)
	}
	if x.decl.IsTransactional() {
		return x.runTransactional(ctx, in)
	}
	return x.runBody(ctx, in)
}

// holderLost handles an EFFECTFUL key taken over from a holder that is gone:
// its effect may have landed, so, unless the declaration's probe can say
// what happened, the key is marked indeterminate and this execution stops
// without entering the body.
func (x *execution) holderLost(ctx context.Context, lost *store.Record) (any, error) {
	cause := fmt.Errorf("holder %q stopped answering without recording an outcome", lost.Holder)
	return x.unknownOutcome(ctx, activity.ReasonHolderLost, false, cause)
}

// runBody runs the activity's body under the claim, renewing the lease
// while it runs, and settles the claim with what it returned.
func (x *execution) runBody(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	x.mark(ctx, activity.StageBody, false)
	run := x.runUnderLease(ctx, activity.WithKey(ctx, keyspace.Key(x.key)), in)
	if run.superseded != nil {
		return x.supersededBody(ctx, run)
	}
	v := judgeBody(x.decl, x.codec, run)
	if v.unknown != nil {
		// Nobody can state the outcome yet: the probe, if declared, is
		// asked first, with a store budget of its own once it answered.
		return x.unknownOutcome(ctx, v.reason, true, v.unknown)
	}
	// The body has returned: what follows must happen even if the
	// activity's context has ended.
	sctx, cancel := storeContext(ctx, x.opts.StoreTimeout)
	defer cancel()
	x.settler().settle(sctx, v.settlement)
	if run.panicked != nil {
		panic(run.panicked)
	}
	// A result goes back as the body returned it: the SDK encodes it with
	// the worker's converter and codecs, as it would without this library,
	// whatever converter the record was made with.
	return v.result, v.err
}

// bodyVerdict is what a body's return calls for: a settlement of the
// claim and the call's answer, or (unknown set) an outcome nobody can
// state yet.
type bodyVerdict struct {
	settlement
	result  any
	err     error
	unknown error           // the cause of an unknown outcome; nil if it is known
	reason  activity.Reason // why it is unknown
}

// judgeBody turns what a body of decl under a claim still held returned
// into its verdict, encoding a result with c. It writes nothing.
func judgeBody(decl *activity.Declaration, c codec, run bodyRun) bodyVerdict {
	kind := decl.Kind()
	err := run.err
	effect := kind == activity.KindEffectful && !activity.IsNoEffect(err)
	switch {
	case err != nil && run.panicked == nil && decl.IsDefinite(err):
		// A definite outcome: recorded, and answered to every duplicate.
		return bodyVerdict{settlement: settlement{how: settleFailure, cause: err}, err: err}
	case run.lapsed && err != nil && effect:
		// The body was stopped because its lease may have run out: it is
		// the lost holder a taker would find, still settling its key.
		return bodyVerdict{unknown: fmt.Errorf("%w: %w", ErrLeaseLapsed, err), reason: activity.ReasonHolderLost}
	case run.panicked != nil:
		perr := fmt.Errorf("activity panicked: %v", run.panicked)
		if kind == activity.KindEffectful {
			return bodyVerdict{unknown: perr, reason: activity.ReasonBodyFailed}
		}
		return bodyVerdict{settlement: settlement{how: settleRelease, cause: perr}}
	case err != nil && effect:
		return bodyVerdict{unknown: err, reason: activity.ReasonBodyFailed}
	case err != nil:
		err = activity.UnwrapNoEffect(err)
		return bodyVerdict{settlement: settlement{how: settleRelease, cause: err}, err: err}
	}
	payloads, err := c.encode(run.result)
	if err != nil {
		// The body ran but its result cannot cross the wire; Temporal would
		// fail the attempt the same way.
		if kind == activity.KindEffectful {
			return bodyVerdict{unknown: err, reason: activity.ReasonBodyFailed}
		}
		return bodyVerdict{settlement: settlement{how: settleRelease, cause: err}, err: err}
	}
	return bodyVerdict{settlement: settlement{how: settleRecord, payloads: payloads}, result: run.result}
}

// supersededBody ends a call whose claim was taken over while its body
// ran: the key is another caller's now, so nothing the body returned may
// be recorded under it, and there is no claim left to free or mark.
func (x *execution) supersededBody(ctx context.Context, run bodyRun) (any, error) {
	err := run.err
	if run.panicked == nil && err != nil && !x.decl.IsDefinite(err) &&
		x.kind == activity.KindEffectful && !activity.IsNoEffect(err) {
		// Stopped half-way, an EFFECTFUL body may have had its effect.
		x.rep.superseded(ctx, run.superseded, false)
		return nil, x.indeterminate(ctx, activity.ReasonHolderLost, true, fmt.Errorf("%w: %w", ErrSuperseded, err))
	}
	x.rep.superseded(ctx, run.superseded, true)
	switch {
	case run.panicked != nil:
		panic(run.panicked)
	case err == nil:
		return run.result, nil
	case x.decl.IsDefinite(err):
		// Known, though it can no longer be recorded under the key.
		return nil, err
	}
	return nil, supersededError(x.decl.Name(), err)
}

// bodyRun is what a body run under its lease returned.
type bodyRun struct {
	result   any
	err      error
	panicked any // what the body panicked with, if it did
	// superseded is the store's answer to the renewal that found the claim
	// taken over while the body ran; nil if it was not.
	superseded error
	lapsed     bool // its context ended with ErrLeaseLapsed
}

// runUnderLease runs the body with a context derived from base, renewing
// the claim while it runs: a renewal that finds the claim taken over
// cancels the body with ErrSuperseded, and a store that acknowledges no
// renewal for most of a lease cancels it with ErrLeaseLapsed. A panic is
// recovered into the result, for the caller to settle the claim before it
// panics again.
func (x *execution) runUnderLease(ctx, base context.Context, in *interceptor.ExecuteActivityInput) bodyRun {
	bodyCtx, cancelBody := context.WithCancelCause(base)
	defer cancelBody(nil)
	var (
		superseded error // written by the renewer, read once it has stopped
		lapsed     atomic.Bool
	)
	stop := x.renew(ctx, func(err error) {
		superseded = err
		cancelBody(ErrSuperseded)
	}, func(err error) {
		lapsed.Store(true)
		cancelBody(ErrLeaseLapsed)
		x.rep.count(metricname.LeaseLapsed)
		x.rep.observe(ctx, EventLeaseLapsed, err)
	})
	var run bodyRun
	func() {
		defer func() {
			if p := recover(); p != nil {
				run.panicked = p
			}
		}()
		run.result, run.err = x.next.ExecuteActivity(bodyCtx, in)
	}()
	stop()
	run.superseded = superseded
	run.lapsed = lapsed.Load() && superseded == nil
	return run
}
