package interceptor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/interceptor"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// ErrSuperseded is the cause of a body's context ending because its claim
// was taken over while it ran: its lease ran out (the store could not be
// reached to renew it, or the worker stalled) and another caller superseded
// it. A body that sees it should stop; what it returns is not recorded.
var ErrSuperseded = errors.New("idempotency: the claim was taken over by another caller")

// ErrLeaseLapsed is the cause of a body's context ending because the store
// acknowledged no renewal of its claim for most of a lease (four fifths of
// Options.Lease): the lease may run out before the body returns, after which
// another caller may take the key over — and, with a probe declared, ask
// the downstream while this body's request is still on its way. The body
// should stop without applying its effect. What it returns is still
// recorded if the claim is still this execution's; an EFFECTFUL body that
// fails is indeterminate (ReasonHolderLost).
var ErrLeaseLapsed = errors.New("idempotency: the claim's lease may have run out: the store acknowledged no renewal")

// fenceFraction is the part of a lease after the last acknowledged
// renewal (counted from when it was sent) at which a holder stops its
// body: the rest is the margin within which the body must notice.
const fenceFraction = 4.0 / 5

var errNoTenant = errors.New("no tenant could be resolved for the execution")

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
		x.count(metricname.LeaseLapsed)
		x.observe(ctx, EventLeaseLapsed, err)
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

// runBody runs the activity's body under the claim, renewing the lease
// while it runs, and settles the claim with what it returned.
func (x *execution) runBody(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	x.mark(ctx, activity.StageBody, false)
	run := x.runUnderLease(ctx, activity.WithKey(ctx, keyspace.Key(x.key)), in)
	if run.superseded != nil {
		return x.supersededBody(ctx, run)
	}
	v := x.judgeBody(run)
	if v.unknown != nil {
		// Nobody can state the outcome yet: the probe, if declared, is
		// asked first, with a store budget of its own once it answered.
		return x.unknownOutcome(ctx, v.reason, true, v.unknown)
	}
	// The body has returned: what follows must happen even if the
	// activity's context has ended.
	sctx, cancel := x.storeContext(ctx)
	defer cancel()
	x.settle(sctx, v.settlement)
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

// judgeBody turns what a body under a claim still held returned into its
// verdict.
func (x *execution) judgeBody(run bodyRun) bodyVerdict {
	err := run.err
	effect := x.kind == activity.KindEffectful && !activity.IsNoEffect(err)
	switch {
	case err != nil && run.panicked == nil && x.decl.IsDefinite(err):
		// A definite outcome: recorded, and answered to every duplicate.
		return bodyVerdict{settlement: settlement{how: settleFailure, cause: err}, err: err}
	case run.lapsed && err != nil && effect:
		// The body was stopped because its lease may have run out: it is
		// the lost holder a taker would find, still settling its key.
		return bodyVerdict{unknown: fmt.Errorf("%w: %w", ErrLeaseLapsed, err), reason: activity.ReasonHolderLost}
	case run.panicked != nil:
		perr := fmt.Errorf("activity panicked: %v", run.panicked)
		if x.kind == activity.KindEffectful {
			return bodyVerdict{unknown: perr, reason: activity.ReasonBodyFailed}
		}
		return bodyVerdict{settlement: settlement{how: settleRelease, cause: perr}}
	case err != nil && effect:
		return bodyVerdict{unknown: err, reason: activity.ReasonBodyFailed}
	case err != nil:
		err = activity.UnwrapNoEffect(err)
		return bodyVerdict{settlement: settlement{how: settleRelease, cause: err}, err: err}
	}
	payloads, err := x.encode(run.result)
	if err != nil {
		// The body ran but its result cannot cross the wire; Temporal would
		// fail the attempt the same way.
		if x.kind == activity.KindEffectful {
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
		x.superseded(ctx, run.superseded, false)
		return nil, x.indeterminate(ctx, activity.ReasonHolderLost, true, fmt.Errorf("%w: %w", ErrSuperseded, err))
	}
	x.superseded(ctx, run.superseded, true)
	switch {
	case run.panicked != nil:
		panic(run.panicked)
	case err == nil:
		return run.result, nil
	case x.decl.IsDefinite(err):
		// Known, though it can no longer be recorded under the key.
		return nil, err
	}
	return nil, x.supersededError(err)
}

// renew keeps the claim's lease alive until the returned function is
// called, that is until the body returns — also past the activity's own
// deadline: a body that outlived its start-to-close is still running and
// may yet record, so a retry waits for it instead of presuming it dead. If
// the store answers that the claim is no longer held it calls lost once and
// stops. If lapsed is not nil and the store acknowledges no renewal for
// fenceFraction of a lease, counted from when the last acknowledged claim
// or renewal was sent, it calls lapsed once, before the lease can run out,
// and goes on renewing: the claim may still be this execution's, to settle.
func (x *execution) renew(ctx context.Context, lost, lapsed func(error)) (stop func()) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &renewer{x: x, lapsed: lapsed}
	if lapsed != nil {
		// A timer of its own: a renewal that hangs must not hold the fence
		// back.
		r.fence = time.AfterFunc(r.fenceAt(), r.fenced)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.loop(ctx, rctx, lost)
	}()
	return func() {
		cancel()
		r.mu.Lock()
		r.stopped = true
		r.mu.Unlock()
		if r.fence != nil {
			r.fence.Stop()
		}
		r.wg.Wait()
	}
}

// renewer is the state renew's goroutine and fence timer share.
type renewer struct {
	x      *execution
	lapsed func(error)
	fence  *time.Timer // nil without lapsed
	wg     sync.WaitGroup

	mu      sync.Mutex
	lastErr error // the last renewal's failure, for lapsed
	stopped bool
	fired   bool
}

// fenceAt is how long from now the fence falls: fenceFraction of a lease
// after the last acknowledged claim or renewal was sent.
func (r *renewer) fenceAt() time.Duration {
	from := time.Unix(0, r.x.leaseFrom.Load())
	return time.Until(from.Add(time.Duration(float64(r.x.opts.Lease) * fenceFraction)))
}

// fenced calls lapsed, once, unless renew was stopped.
func (r *renewer) fenced() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.fired {
		return
	}
	r.fired = true
	cause := r.lastErr
	if cause == nil {
		cause = errors.New("no renewal answered")
	}
	r.lapsed(fmt.Errorf("%w: %w", ErrLeaseLapsed, cause))
}

// loop renews every third of a lease until rctx ends or the store says
// the claim is no longer this execution's (then it calls lost). A renewal
// gets a third of a lease: the next one is due by then.
func (r *renewer) loop(ctx, rctx context.Context, lost func(error)) {
	x := r.x
	perCall := min(x.opts.Lease/3, x.opts.StoreTimeout)
	t := time.NewTicker(x.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-rctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		cctx, cancelCall := context.WithTimeout(rctx, perCall)
		_, err := x.opts.Store.Renew(cctx, store.RenewParams{
			Tenant: x.tenant, Key: x.key, Token: x.token, Lease: x.opts.Lease,
		})
		cancelCall()
		switch {
		case err == nil:
			x.leaseFrom.Store(sent.UnixNano())
			if r.fence != nil {
				r.fence.Reset(r.fenceAt())
			}
		case rctx.Err() != nil:
			return
		case errors.Is(err, store.ErrNotHolder):
			// Another caller took the key over: stop the body.
			lost(fmt.Errorf("renewing the lease: %w", err))
			return
		default:
			r.mu.Lock()
			r.lastErr = err
			r.mu.Unlock()
			x.storeError(ctx, fmt.Errorf("renewing the lease: %w", err))
		}
	}
}

func (x *execution) encode(result any) (*commonpb.Payloads, error) {
	if result == nil {
		return nil, nil
	}
	if p, ok := result.(*commonpb.Payloads); ok {
		return p, nil
	}
	p, err := x.dc.ToPayloads(result)
	if err != nil {
		return nil, fmt.Errorf("idempotency: encoding the result of %s: %w", x.decl.Name(), err)
	}
	return p, nil
}

// holderLost handles an EFFECTFUL key taken over from a holder that is gone:
// its effect may have landed, so, unless the declaration's probe can say
// what happened, the key is marked indeterminate and this execution stops
// without entering the body.
func (x *execution) holderLost(ctx context.Context, lost *store.Record) (any, error) {
	cause := fmt.Errorf("holder %q stopped answering without recording an outcome", lost.Holder)
	return x.unknownOutcome(ctx, activity.ReasonHolderLost, false, cause)
}

// storeContext bounds the store calls that settle a claim once its body
// (or its probe) has returned: StoreTimeout from now, whether or not the
// activity's context has ended.
func (x *execution) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), x.opts.StoreTimeout)
}
