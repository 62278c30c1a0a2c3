package interceptor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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

// The lease a body (or a probe) runs under: renew keeps it alive while it
// runs and stops the body when the claim is taken over or the store stops
// acknowledging renewals. The body itself runs in activity_execute.go.

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
			x.rep.storeError(ctx, fmt.Errorf("renewing the lease: %w", err))
		}
	}
}

// storeContext bounds the store calls that settle a claim once its body
// (or its probe) has returned: timeout (Options.StoreTimeout) from now,
// whether or not the activity's context has ended.
func storeContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}
