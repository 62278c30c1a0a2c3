package interceptor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/store"
)

// The end states of a call report here: each reports its event with
// Event.Final set and counts its metric with it (endEvent). The top of
// activity_call.go lists them.

// indeterminate reports and returns the non-retryable indeterminate error.
func (x *execution) indeterminate(ctx context.Context, reason activity.Reason, entered bool, cause error) error {
	e := x.rep.event
	e.Kind, e.Reason, e.Err = EventIndeterminate, reason, cause
	x.rep.end(ctx, e, metricname.Indeterminate)
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
	x.rep.endEvent(ctx, EventNotRun, "", cause)
	return temporal.NewApplicationErrorWithCause(
		fmt.Sprintf("idempotency: activity %q was not run: %s: %v", x.decl.Name(), reason, cause), decision.ErrorTypeKeyNotDerivable, cause)
}

// invalidTenant refuses an execution whose tenant no store accepts. The
// error carries no key, and neither kind is retried: the tenant will be
// refused the same way every time.
func (x *execution) invalidTenant(ctx context.Context, cause error) error {
	return x.misconfigured(ctx, decision.ErrorTypeInvalidTenant, fmt.Errorf("the tenant cannot be stored: %w", cause))
}

// noTenant refuses an execution no tenant could be resolved for, saying how
// to give its workflow one and, when its memo was there but held none, why.
// Where the tenant travels with the call (the header, the memo, the default
// the workflow recorded) the refusal is non-retryable: every attempt of the
// call carries the header it was scheduled with, so no retry can find one,
// and the run is recovered after the fix by a reset to its first workflow
// task. Where the worker's own Options.Tenant function found none, it is
// retryable: a redeployed worker's function answers the next attempt.
func (x *execution) noTenant(ctx context.Context) error {
	if x.nexus != nil {
		r := x.nexus.request
		return x.misconfigured(ctx, decision.ErrorTypeNoTenant, fmt.Errorf("%w: the handler's Options.NexusTenant resolved none for the Nexus request "+
			"(endpoint %q, service %q); the handler decides a request's tenant: by the endpoint it came through, "+
			"or by the caller's %s header only for an endpoint it trusts", errNoTenant, r.Endpoint, r.Service, TenantHeader))
	}
	if !x.root.tenantFromHeader {
		// The worker's own function found none: worker configuration, which a
		// redeploy fixes and the call's next attempt then reaches. Retried,
		// as Temporal retries a configuration error until it is fixed.
		cause := fmt.Errorf("%w: Options.Tenant resolved none (retried: fix the worker's Options.Tenant and the call runs)", errNoTenant)
		x.rep.endEvent(ctx, EventMisconfigured, metricname.Misconfigured, cause)
		return temporal.NewApplicationError(fmt.Sprintf("idempotency: activity %q was not run: %v", x.decl.Name(), cause), decision.ErrorTypeNoTenant)
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
	x.rep.endEvent(ctx, EventMisconfigured, metricname.Misconfigured, cause)
	// The message says it all; the cause stays with the event (errors.Is),
	// it would cross to the workflow as a second copy of the same words.
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("idempotency: activity %q was not run: %v", x.decl.Name(), cause), typ, nil)
}

// storeFailed ends a call the store could not say whether its key is free
// for, before the body ran. The caller's own cancellation is returned as it
// is. A store that is down does not read as permission: the body is not
// entered, and since it was not, this attempt ran nothing, whatever the
// kind. The retryable [activity.NotRun] error says so (EventNotRun), and
// whoever runs the call again (the retry policy, the workflow's router
// waiting for the store, the workflow's code) finds what the claim decides
// then.
func (x *execution) storeFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	x.rep.storeError(ctx, err)
	if errors.Is(err, store.ErrInvalid) {
		return x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable, err)
	}
	x.rep.endEvent(ctx, EventNotRun, "", err)
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

// deduplicated ends a call its key's recorded outcome answers.
func (x *execution) deduplicated(ctx context.Context, rec store.Record, waited time.Duration) (any, error) {
	e := x.rep.event
	e.Kind, e.Duration = EventDeduplicated, waited
	x.rep.end(ctx, e, metricname.Deduplicated)
	return x.codec.outcome(rec.Outcome, x.key)
}
