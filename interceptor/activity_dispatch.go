package interceptor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
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

// record stores the outcome under the claim, retrying briefly. If the store
// stays down the result is still returned: the effect happened, and Temporal
// records it durably in the workflow's history.
func (x *execution) record(ctx context.Context, payloads *commonpb.Payloads) {
	var outcome []byte
	if payloads != nil {
		var err error
		if outcome, err = proto.Marshal(payloads); err != nil {
			x.orphaned(ctx, err)
			return
		}
	}
	complete := func(ctx context.Context) error {
		return x.opts.Store.Complete(ctx, store.CompleteParams{
			Tenant: x.tenant, Key: x.key, Token: x.token, Outcome: outcome,
		})
	}
	completed := func(ctx context.Context) { x.observe(ctx, EventCompleted, nil) }
	// A Complete whose answer was lost and that is made again finds the
	// claim no longer pending: completed, under this token, with this
	// outcome, and by no person's decision, it is this execution's own.
	landed := func(rec store.Record, err error) bool {
		return err == nil && rec.Token == x.token && rec.State == store.StateCompleted &&
			rec.Resolution.Action == 0 && bytes.Equal(rec.Outcome, outcome)
	}
	backoff := x.opts.RecordBackoff
	var err error
	for attempt := 0; attempt < x.opts.RecordAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				// The store did not answer within StoreTimeout: a store
				// that is down, as far as this call can tell.
				x.settleLater(ctx, "recording the outcome", errors.Join(err, ctx.Err()), complete, completed, landed)
				return
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		err = complete(ctx)
		if err == nil || (attempt > 0 && errors.Is(err, store.ErrNotHolder) && x.settled(ctx, landed)) {
			completed(ctx)
			return
		}
		x.storeError(ctx, fmt.Errorf("recording the outcome: %w", err))
		if !retriable(err) {
			x.orphaned(ctx, err)
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

// maxOrphanBackoff caps the pause between background attempts to settle an
// orphaned claim.
const maxOrphanBackoff = 5 * time.Second

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
	if x.opts.OrphanRetry <= 0 {
		x.orphaned(ctx, fmt.Errorf("%s: %w", what, err))
		return
	}
	if !x.root.reserveBackground() {
		x.orphaned(ctx, fmt.Errorf("%s (not retried: the interceptor is stopped or already retries %d claims): %w",
			what, MaxOrphanRetries, err))
		return
	}
	x.orphaned(ctx, fmt.Errorf("%s (retrying in the background): %w", what, err))
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
	backoff := x.opts.RecordBackoff
	for {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxOrphanBackoff)
		sctx, scancel := context.WithTimeout(ctx, x.opts.StoreTimeout)
		err := write(sctx)
		if err != nil && errors.Is(err, store.ErrNotHolder) && x.settled(sctx, done) {
			err = nil // an earlier attempt landed; its answer was lost
		}
		scancel()
		switch {
		case err == nil:
			x.count(MetricOrphansRecorded)
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

func (x *execution) orphaned(ctx context.Context, err error) {
	x.count(MetricOrphaned)
	x.observe(ctx, EventOrphaned, err)
}

func (x *execution) release(ctx context.Context, cause error) {
	release := func(ctx context.Context) error {
		return x.opts.Store.Release(ctx, store.ReleaseParams{Tenant: x.tenant, Key: x.key, Token: x.token})
	}
	released := func(ctx context.Context) { x.observe(ctx, EventReleased, cause) }
	// A release whose answer was lost left the key free. (A key claimed
	// again since reads as not freed: the retry settles that, fenced.)
	freed := func(_ store.Record, err error) bool { return errors.Is(err, store.ErrNotFound) }
	if err := release(ctx); err != nil {
		// The claim stays pending until the store answers again or its
		// lease runs out; the retry, an attempt of this same activity,
		// waits for either.
		x.storeError(ctx, fmt.Errorf("releasing the claim: %w", err))
		switch {
		case !retriable(err):
		case x.settled(ctx, freed):
			released(ctx) // it landed; only its answer was lost
		default:
			x.settleLater(ctx, "releasing the claim", err, release, released, freed)
		}
		return
	}
	released(ctx)
}

// markIndeterminate keeps the claim and records that its outcome is
// unknown, then returns the indeterminate error. If the store cannot be
// reached the mark is made in the background once it answers again
// (Options.OrphanRetry); until then the claim stays pending, and a
// duplicate that finds its lease run out declares the holder lost, which
// ends the same way.
func (x *execution) markIndeterminate(ctx context.Context, reason activity.Reason, entered bool, cause error) error {
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
			// The indeterminate event below already reports the call; the
			// mark landing later is counted, not reported again.
			x.settleLater(ctx, "marking the claim indeterminate", err, mark, nil, marked)
		}
	}
	return x.indeterminate(ctx, reason, entered, cause)
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

// indeterminate reports and returns the non-retryable indeterminate error.
func (x *execution) indeterminate(ctx context.Context, reason activity.Reason, entered bool, cause error) error {
	x.count(MetricIndeterminate)
	e := x.event
	e.Kind, e.Reason, e.Err = EventIndeterminate, reason, cause
	x.emit(ctx, e)
	return activity.NewIndeterminateError(activity.IndeterminateOutcome{
		Activity:    x.decl.Name(),
		Tenant:      x.tenant,
		Key:         x.key,
		Reason:      reason,
		BodyEntered: entered,
		// Only a call with no key is known to have had no effect: under a
		// key, an earlier attempt or a duplicate may have run the body, and
		// a store that cannot be asked cannot say otherwise.
		EffectMayHaveLanded: entered || reason != activity.ReasonKeyNotDerivable,
		WorkflowID:          x.info.WorkflowExecution.ID,
		RunID:               x.info.WorkflowExecution.RunID,
		ActivityID:          x.info.ActivityID,
		Token:               x.token,
		Check:               string(x.check),
		Retention:           x.decl.Retention(),
		Probe:               x.decl.Probe() != nil,
	}, cause)
}

// notDeduplicable handles an execution that cannot be deduplicated before
// its body runs: the body is never entered. IDEMPOTENT gets a retryable
// error; EFFECTFUL the non-retryable indeterminate one.
func (x *execution) notDeduplicable(ctx context.Context, reason activity.Reason, cause error) error {
	// A transactional activity's earlier attempts left either a completed
	// record or nothing: an attempt that cannot claim is one that did not
	// run, as for IDEMPOTENT.
	if x.kind == activity.KindEffectful && !x.decl.IsTransactional() {
		return x.indeterminate(ctx, reason, false, cause)
	}
	return temporal.NewApplicationErrorWithCause(
		fmt.Sprintf("idempotency: activity %q was not run: %s: %v", x.decl.Name(), reason, cause), ErrorTypeKeyNotDerivable, cause)
}

// invalidTenant refuses an execution whose tenant no store accepts. The
// error carries no key, and neither kind is retried: the tenant will be
// refused the same way every time.
func (x *execution) invalidTenant(ctx context.Context, cause error) error {
	return x.misconfigured(ctx, decision.ErrorTypeInvalidTenant, fmt.Errorf("the tenant cannot be stored: %w", cause))
}

// noTenant refuses an execution no tenant could be resolved for, saying how
// to give its workflow one and, when its memo was there but held none, why.
func (x *execution) noTenant(ctx context.Context) error {
	if !x.root.tenantFromHeader {
		return x.misconfigured(ctx, decision.ErrorTypeNoTenant, fmt.Errorf("%w: Options.Tenant resolved none", errNoTenant))
	}
	if standalone(x.info) {
		return x.misconfigured(ctx, decision.ErrorTypeNoTenant, fmt.Errorf("%w: the standalone activity carries no tenant; give it one: "+
			"start it with interceptor.WithTenant(ctx, tenant) on a client whose ContextPropagators hold interceptor.TenantPropagator() "+
			"(the %s header), or set Options.DefaultTenant on its worker", errNoTenant, TenantHeader))
	}
	why := "the workflow carries no tenant"
	if p := tenantProblem(ctx); p != "" {
		why += " (" + p + ")"
	}
	return x.misconfigured(ctx, decision.ErrorTypeNoTenant, fmt.Errorf("%w: %s; give the workflow one: "+
		"start it with interceptor.WithTenant(ctx, tenant) on a client that carries the plugin "+
		"(worker.NewPlugin, worker.ClientPlugin() or worker.Dial), "+
		"or give its worker a default, worker.PluginOptions{Idempotency: interceptor.Options{DefaultTenant: \"acme\"}} "+
		"(Options.DefaultTenant), "+
		"or start it with the memo %s holding the tenant as a string (temporal workflow start --memo '%s=\"acme\"'); "+
		"a client without the plugin needs interceptor.TenantPropagator() in its ContextPropagators (the %s header)",
		errNoTenant, why, TenantMemo, TenantMemo, TenantHeader))
}

// misconfigured refuses, before any store call, an execution the
// configuration gives no usable tenant: non-retryable for both kinds, with
// the error type typ, and reported as a configuration error, never as an
// indeterminate outcome — the body did not run, so nobody need decide.
func (x *execution) misconfigured(ctx context.Context, typ string, cause error) error {
	x.count(MetricMisconfigured)
	x.observe(ctx, EventMisconfigured, cause)
	// The message says it all; the cause stays with the event (errors.Is),
	// it would cross to the workflow as a second copy of the same words.
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("idempotency: activity %q was not run: %v", x.decl.Name(), cause), typ, nil)
}

// storeFailed handles a store error before the body runs. The caller's own
// cancellation is returned as it is; anything else means the store could not
// say whether the key is free, and a store that is down does not read as
// permission: the body is not entered. Since it was not, this attempt ran
// nothing, whatever the kind: the retryable [activity.NotRun] error says so,
// and whoever runs the call again (the retry policy, the workflow's router
// waiting for the store, the workflow's code) finds what the claim decides
// then. Before, an EFFECTFUL call failed here with the indeterminate error,
// and a workflow routing decisions asked a person about an outcome the
// library knew: nothing ran.
func (x *execution) storeFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	x.storeError(ctx, err)
	if errors.Is(err, store.ErrInvalid) {
		return x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable, err)
	}
	return activity.NewNotRunError(activity.NotRun{
		Activity:   x.decl.Name(),
		Tenant:     x.tenant,
		Key:        x.key,
		Reason:     activity.ReasonStoreUnavailable,
		WorkflowID: x.info.WorkflowExecution.ID,
		RunID:      x.info.WorkflowExecution.RunID,
		ActivityID: x.info.ActivityID,
	}, fmt.Errorf("idempotency: activity %q was not run: the store did not answer: %w", x.decl.Name(), err))
}

func (x *execution) deduplicated(ctx context.Context, rec store.Record, waited time.Duration) (any, error) {
	x.count(MetricDeduplicated)
	e := x.event
	e.Kind, e.Duration = EventDeduplicated, waited
	x.emit(ctx, e)
	if len(rec.Outcome) == 0 {
		return nil, nil
	}
	var p commonpb.Payloads
	if err := proto.Unmarshal(rec.Outcome, &p); err != nil {
		return nil, x.unreadable(err)
	}
	return x.answer(&p)
}

func (x *execution) storeError(ctx context.Context, err error) {
	x.count(MetricStoreErrors)
	x.observe(ctx, EventStoreError, err)
}

func (x *execution) count(name string) { x.metrics.Counter(name).Inc(1) }

func (x *execution) observe(ctx context.Context, kind EventKind, err error) {
	e := x.event
	e.Kind, e.Err = kind, err
	x.emit(ctx, e)
}

func (x *execution) emit(ctx context.Context, e Event) {
	if x.opts.Observer != nil {
		x.opts.Observer.Observe(ctx, e)
	}
}

// transactionalHolder begins the holder of a claim that keeps a record
// clean: one on which nothing outside a transaction can have applied an
// effect since the key was last free. Only a transactional execution
// (activity.Policy.Transactional) claims under it, and only when the record
// it claims is clean: a free key, or a takeover of a holder that itself
// begins with it (claimHolder). A transactional execution that takes over
// any other holder — an attempt made outside a transaction, by a worker of
// an earlier rollout or release, or an execution that took such a holder
// over to mark it — claims under its plain name, so the record stays
// unclean through every takeover, undone takeover (whose record names the
// taker) and mark that does not land, until a person decides or the key is
// freed. A gone holder of a clean record left nothing behind, and its key
// may run the body again; any other is marked indeterminate. Holders of
// other claims begin with a hexadecimal execution ID (holderName), never
// with this.
const transactionalHolder = "tx:"

// isTransactionalHolder reports whether a record held by holder is clean:
// see transactionalHolder.
func isTransactionalHolder(holder string) bool {
	return strings.HasPrefix(holder, transactionalHolder)
}

// claimHolder is the holder the next claim is made under: with lost set, a
// takeover of that record. A transactional execution claims as a
// transactional holder only a record that stays clean by its claim.
func (x *execution) claimHolder(lost *store.Record) string {
	if !x.decl.IsTransactional() || (lost != nil && !isTransactionalHolder(lost.Holder)) {
		return x.holder
	}
	return transactionalHolder + x.holder
}

// holderName identifies an execution attempt in a record:
// "<execution digest>:<attempt>:<worker identity>". The digest stands for
// the workflow ID, run ID and activity ID, which may hold any character,
// whether the activity is local, and a standalone activity's run ID.
func holderName(info sdkactivity.Info, identity string) string {
	return executionID(info) + ":" + strconv.FormatInt(int64(info.Attempt), 10) + ":" + identity
}

func executionID(info sdkactivity.Info) string {
	h := sha256.New()
	if info.IsLocalActivity {
		// Local activities number their IDs apart from regular ones, so the
		// same ID may name one of each in a run. Regular activities keep
		// the digest they always had, so holders written by older workers
		// are still recognised.
		h.Write([]byte("local\x00"))
	}
	fields := []string{info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID}
	if standalone(info) {
		// Runs of one standalone activity ID share its key; the holder
		// tells them apart.
		fields = append(fields, info.ActivityRunID)
	}
	for _, s := range fields {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// EncodeOutcome encodes value as the dispatcher records an outcome: the
// payloads dc makes of it, in protobuf wire form. Use it, with the worker's
// data converter, to record a person's decision on an indeterminate key
// through store.Resolve, so the duplicates that follow receive value.
func EncodeOutcome(dc converter.DataConverter, value any) ([]byte, error) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	p, err := dc.ToPayloads(value)
	if err != nil {
		return nil, fmt.Errorf("idempotency: encoding an outcome: %w", err)
	}
	return proto.Marshal(p)
}

// DecodeOutcome decodes a recorded outcome into valuePtr with dc, the
// inverse of [EncodeOutcome]. An empty outcome (an activity that returns
// only an error) leaves valuePtr unchanged.
func DecodeOutcome(dc converter.DataConverter, outcome []byte, valuePtr any) error {
	if len(outcome) == 0 {
		return nil
	}
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var p commonpb.Payloads
	if err := proto.Unmarshal(outcome, &p); err != nil {
		return fmt.Errorf("idempotency: decoding an outcome: %w", err)
	}
	return dc.FromPayloads(&p, valuePtr)
}
