package interceptor

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/keyspace"
)

// errProbeLate is the cause of a probe that did not answer before the
// activity's deadline (or its cancellation).
var errProbeLate = errors.New("idempotency: the probe did not answer before the activity's deadline")

// unknownOutcome handles an EFFECTFUL outcome nobody recorded while this
// execution holds the claim: the body failed, or the key was taken over from
// a holder that stopped answering. With a probe declared it asks the
// downstream first; otherwise, and when the probe cannot tell, it marks the
// claim indeterminate. actx is the activity's context: the probe's time is
// bounded by it, and the store writes that follow get StoreTimeout of their
// own, counted from when the probe answered, however long it took.
func (x *execution) unknownOutcome(actx context.Context, reason activity.Reason, entered bool, cause error) (any, error) {
	if x.decl.Probe() == nil {
		sctx, cancel := storeContext(actx, x.opts.StoreTimeout)
		defer cancel()
		return nil, x.markIndeterminate(sctx, reason, entered, cause)
	}
	// The claim stays this execution's while the probe runs: its lease is
	// renewed as while the body ran, so a duplicate waits for the answer
	// instead of finding the holder lost.
	//
	// A body that outlived the activity (its start-to-close passed, or the
	// activity was cancelled) can no longer answer Temporal, but what the
	// probe says can still settle the record for the retry waiting on the
	// key: the probe then runs within StoreTimeout instead.
	base := actx
	if actx.Err() != nil {
		late, cancelLate := context.WithTimeout(context.WithoutCancel(actx), x.opts.StoreTimeout)
		defer cancelLate()
		base = late
	}
	pctx, cancelProbe := context.WithCancelCause(base)
	defer cancelProbe(nil)
	var superseded error // written by the renewer, read once it has stopped
	stop := x.renew(actx, func(err error) {
		superseded = err
		cancelProbe(ErrSuperseded)
	}, nil)
	p := prober{probe: x.decl.Probe(), fn: x.decl.Func(), activity: x.decl.Name(), tenant: x.tenant, key: x.key,
		codec: x.codec, rep: &x.rep}
	ans, perr := p.ask(pctx, reason, entered)
	stop()
	// The probe's time was its own: the writes that settle what it said
	// start with a full StoreTimeout, so a slow probe never reads as a
	// store outage.
	sctx, cancelStore := storeContext(actx, x.opts.StoreTimeout)
	defer cancelStore()
	if superseded != nil {
		// The key is another caller's now: nothing may be written under
		// it, whatever the probe said.
		x.rep.superseded(sctx, superseded, false)
		x.rep.probed(sctx, EventProbeUnsettled, metricname.ProbeUnsettled, reason, ErrSuperseded)
		return nil, x.indeterminate(sctx, activity.ReasonHolderLost, entered,
			fmt.Errorf("%w while its probe ran: %w", ErrSuperseded, cause))
	}
	s, result, err := p.judge(sctx, ans, perr, reason, entered, cause)
	x.settler().settle(sctx, s)
	if s.how == settleMark {
		return nil, x.indeterminate(sctx, reason, entered, s.cause)
	}
	return result, err
}

// prober asks a declaration's probe about a call's unknown outcome and
// judges its answer.
type prober struct {
	probe    activity.Probe
	fn       any    // the activity's function: a landed result is of its type
	activity string // the declared activity's name
	tenant   string
	key      string
	codec    codec
	rep      *reporter
}

// judge turns the probe's answer about an unknown outcome into the
// claim's settlement and the call's answer, reporting what it settled.
func (p prober) judge(ctx context.Context, ans activity.ProbeAnswer, perr error, reason activity.Reason, entered bool, cause error) (settlement, any, error) {
	if perr == nil && ans.Landing == activity.Landed {
		perr = checkProbeResult(p.fn, ans.Result)
	}
	if perr == nil && ans.Landing == activity.Landed {
		payloads, err := p.codec.encode(ans.Result)
		if err == nil {
			p.rep.probed(ctx, EventProbeLanded, metricname.ProbeLanded, reason, nil)
			// Returned as the body would have returned it: the SDK encodes
			// it with the worker's converter and codecs.
			return settlement{how: settleRecord, payloads: payloads}, ans.Result, nil
		}
		perr = fmt.Errorf("idempotency: the probe's result: %w", err)
	}
	if perr == nil && ans.Landing == activity.NotLanded {
		p.rep.probed(ctx, EventProbeNotLanded, metricname.ProbeNotLanded, reason, nil)
		return settlement{how: settleRelease, cause: cause}, nil, notLanded(p.activity, reason, cause)
	}
	if perr == nil && ans.Landing != activity.CannotTell {
		perr = fmt.Errorf("idempotency: the probe answered an unknown landing %d", ans.Landing)
	}
	if errors.Is(perr, errProbeLate) {
		// Slowness of the probe's own, told apart from a probe that could
		// not tell or failed.
		p.rep.probed(ctx, EventProbeLate, metricname.ProbeLate, reason, perr)
	} else {
		p.rep.probed(ctx, EventProbeUnsettled, metricname.ProbeUnsettled, reason, perr)
	}
	if perr != nil {
		cause = fmt.Errorf("%w (probe: %w)", cause, perr)
	} else {
		cause = fmt.Errorf("%w (probe: cannot tell)", cause)
	}
	return settlement{how: settleMark, reason: reason, entered: entered, cause: cause}, nil, nil
}

// ask runs the probe under the activity's context — its deadline (see
// probeContext) and its cancellation — and gives up on it when that context
// ends, whether or not the probe honours it. A probe that panics has failed.
func (p prober) ask(ctx context.Context, reason activity.Reason, entered bool) (activity.ProbeAnswer, error) {
	p.rep.count(metricname.Probes)
	start := time.Now()
	defer func() { p.rep.metrics.Timer(metricname.ProbeLatency).Record(time.Since(start)) }()
	if err := ctx.Err(); err != nil {
		return activity.ProbeAnswer{}, fmt.Errorf("%w: %w", errProbeLate, context.Cause(ctx))
	}
	pctx, cancel := probeContext(activity.WithKey(ctx, keyspace.Key(p.key)))
	defer cancel()
	req := activity.ProbeRequest{
		Activity:    p.activity,
		Tenant:      p.tenant,
		Key:         keyspace.Key(p.key),
		Reason:      reason,
		BodyEntered: entered,
	}
	type reply struct {
		ans activity.ProbeAnswer
		err error
	}
	ch := make(chan reply, 1) // a late answer is dropped, not blocked on
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- reply{err: fmt.Errorf("idempotency: the probe panicked: %v", p)}
			}
		}()
		ans, err := p.probe(pctx, req)
		ch <- reply{ans, err}
	}()
	select {
	case r := <-ch:
		if r.err == nil && pctx.Err() != nil {
			// It answered, but after the activity's time ran out.
			return activity.ProbeAnswer{}, fmt.Errorf("%w: %w", errProbeLate, context.Cause(pctx))
		}
		return r.ans, r.err
	case <-pctx.Done():
		return activity.ProbeAnswer{}, fmt.Errorf("%w: %w", errProbeLate, context.Cause(pctx))
	}
}

// probeContext bounds a probe by the activity's remaining time, less a
// margin (deadlineMargin, or half the time left if that is shorter) in which
// the dispatcher still records what the probe settled and reports the call's
// end to Temporal before its deadline: an answer that arrives after the
// deadline is lost, and the workflow would see a timeout instead of the
// indeterminate error.
func probeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	left := time.Until(dl)
	return context.WithDeadline(ctx, dl.Add(-min(deadlineMargin, left/2)))
}

// checkProbeResult refuses a landed result that is not a value of the
// activity's return type: recorded, it would answer every duplicate with
// something the workflow cannot decode.
func checkProbeResult(fn any, result any) error {
	ft := reflect.TypeOf(fn)
	if ft.NumOut() < 2 {
		if result != nil {
			return fmt.Errorf("idempotency: the probe answered a result of type %T for an activity that returns only an error", result)
		}
		return nil
	}
	want := ft.Out(0)
	if result == nil {
		switch want.Kind() {
		case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
			return nil
		}
		return fmt.Errorf("idempotency: the probe answered landed with no result; the activity returns %v", want)
	}
	if got := reflect.TypeOf(result); !got.AssignableTo(want) {
		return fmt.Errorf("idempotency: the probe answered a result of type %v; the activity returns %v", got, want)
	}
	return nil
}

// notLanded is the error of a call whose probe said its effect did not land:
// the retryable ErrorTypeNotLanded error, or the body's own error when the
// body said it must not be retried.
func notLanded(name string, reason activity.Reason, cause error) error {
	var appErr *temporal.ApplicationError
	if errors.As(cause, &appErr) && appErr.NonRetryable() {
		return cause
	}
	return benignError(
		fmt.Sprintf("idempotency: activity %q: %s, and its probe says the effect did not land; the key is free", name, reason),
		decision.ErrorTypeNotLanded, cause)
}
