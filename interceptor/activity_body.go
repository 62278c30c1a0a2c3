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
	result     any
	err        error
	panicked   any  // what the body panicked with, if it did
	superseded bool // its claim was taken over while it ran
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
	var superseded, lapsed atomic.Bool
	stop := x.renew(ctx, func(err error) {
		superseded.Store(true)
		cancelBody(ErrSuperseded)
		x.count(MetricSuperseded)
		x.observe(ctx, EventSuperseded, err)
	}, func(err error) {
		lapsed.Store(true)
		cancelBody(ErrLeaseLapsed)
		x.count(MetricLeaseLapsed)
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
	run.superseded = superseded.Load()
	run.lapsed = lapsed.Load() && !run.superseded
	return run
}

// runBody runs the activity's body under the claim, renewing the lease
// while it runs, and records what it returned.
func (x *execution) runBody(ctx context.Context, in *interceptor.ExecuteActivityInput) (result any, err error) {
	x.mark(ctx, activity.StageBody, false)
	run := x.runUnderLease(ctx, activity.WithKey(ctx, keyspace.Key(x.key)), in)
	result, err, panicked := run.result, run.err, run.panicked

	// The body has returned: what follows must happen even if the
	// activity's context has ended. An outcome left to the probe gets a
	// store budget of its own once the probe has answered (unknownOutcome).
	sctx, cancel := x.storeContext(ctx)
	defer cancel()

	if run.superseded {
		// The key is another caller's now: nothing this body returns may be
		// recorded under it, and there is no claim left to free or mark.
		if panicked != nil {
			panic(panicked)
		}
		if err == nil {
			return result, nil
		}
		if x.decl.IsDefinite(err) {
			// Known, though it can no longer be recorded under the key.
			return nil, err
		}
		if x.kind == activity.KindEffectful && !activity.IsNoEffect(err) {
			return nil, x.indeterminate(sctx, activity.ReasonHolderLost, true, fmt.Errorf("%w: %w", ErrSuperseded, err))
		}
		return nil, x.supersededError(err)
	}
	if err != nil && panicked == nil && x.decl.IsDefinite(err) {
		// A definite outcome: recorded, and answered to every duplicate.
		x.recordFailure(sctx, err)
		return nil, err
	}
	if run.lapsed && err != nil && x.kind == activity.KindEffectful && !activity.IsNoEffect(err) {
		// The body was stopped because its lease may have run out: it is
		// the lost holder a taker would find, still settling its key.
		return x.unknownOutcome(ctx, activity.ReasonHolderLost, true, fmt.Errorf("%w: %w", ErrLeaseLapsed, err))
	}
	if panicked != nil {
		perr := fmt.Errorf("activity panicked: %v", panicked)
		if x.kind == activity.KindEffectful {
			return x.unknownOutcome(ctx, activity.ReasonBodyFailed, true, perr)
		}
		x.release(sctx, perr)
		panic(panicked)
	}
	if err != nil {
		if x.kind == activity.KindEffectful && !activity.IsNoEffect(err) {
			return x.unknownOutcome(ctx, activity.ReasonBodyFailed, true, err)
		}
		err = activity.UnwrapNoEffect(err)
		x.release(sctx, err)
		return nil, err
	}

	payloads, encErr := x.encode(result)
	if encErr != nil {
		// The body ran but its result cannot cross the wire; Temporal would
		// fail the attempt the same way.
		if x.kind == activity.KindEffectful {
			return x.unknownOutcome(ctx, activity.ReasonBodyFailed, true, encErr)
		}
		x.release(sctx, encErr)
		return nil, encErr
	}
	x.record(sctx, payloads)
	// The result goes back as the body returned it: the SDK encodes it
	// with the worker's converter and codecs, as it would without this
	// library, whatever converter the record was made with.
	return result, nil
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
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lastErr error // the last renewal's failure, for lapsed
		stopped bool
		fence   *time.Timer
	)
	fenceAt := func() time.Duration {
		from := time.Unix(0, x.leaseFrom.Load())
		return time.Until(from.Add(time.Duration(float64(x.opts.Lease) * fenceFraction)))
	}
	if lapsed != nil {
		// A timer of its own: a renewal that hangs must not hold the fence
		// back.
		var fired bool
		fence = time.AfterFunc(fenceAt(), func() {
			mu.Lock()
			defer mu.Unlock()
			if stopped || fired {
				return
			}
			fired = true
			cause := lastErr
			if cause == nil {
				cause = errors.New("no renewal answered")
			}
			lapsed(fmt.Errorf("%w: %w", ErrLeaseLapsed, cause))
		})
	}
	// A renewal gets a third of a lease: the next one is due by then.
	perCall := min(x.opts.Lease/3, x.opts.StoreTimeout)
	wg.Add(1)
	go func() {
		defer wg.Done()
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
				if fence != nil {
					fence.Reset(fenceAt())
				}
			case rctx.Err() != nil:
				return
			case errors.Is(err, store.ErrNotHolder):
				// Another caller took the key over: stop the body.
				lost(fmt.Errorf("renewing the lease: %w", err))
				return
			default:
				mu.Lock()
				lastErr = err
				mu.Unlock()
				x.storeError(ctx, fmt.Errorf("renewing the lease: %w", err))
			}
		}
	}()
	return func() {
		cancel()
		mu.Lock()
		stopped = true
		mu.Unlock()
		if fence != nil {
			fence.Stop()
		}
		wg.Wait()
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
