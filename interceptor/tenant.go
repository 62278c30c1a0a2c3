package interceptor

import (
	"context"
	"errors"
	"fmt"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// TenantHeader is the Temporal header that carries the tenant from the
// workflow starter to the workflow and on to its activities.
const TenantHeader = "idempotency-tenant"

type tenantKey struct{}

// WithTenant returns a copy of ctx carrying tenant. Pass it to
// client.ExecuteWorkflow on a client configured with [TenantPropagator], and
// the workflow and every activity it schedules run under that tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFromContext returns the tenant ctx carries, if any: the starter's, or
// in an activity the one propagated to it.
func TenantFromContext(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(tenantKey{}).(string)
	return t, ok && t != ""
}

// WorkflowTenant returns the tenant a workflow runs under, if any.
func WorkflowTenant(ctx workflow.Context) (string, bool) {
	t, ok := ctx.Value(tenantKey{}).(string)
	return t, ok && t != ""
}

// WithWorkflowTenant returns a copy of the workflow context carrying tenant,
// so activities and child workflows scheduled with it run under that tenant.
func WithWorkflowTenant(ctx workflow.Context, tenant string) workflow.Context {
	return workflow.WithValue(ctx, tenantKey{}, tenant)
}

// TenantPropagator returns the context propagator that carries the tenant in
// the [TenantHeader] header: from a client context to the workflow, from the
// workflow to its activities and child workflows. Install it in
// client.Options.ContextPropagators; the worker package's plugin and Dial
// do.
func TenantPropagator() workflow.ContextPropagator { return tenantPropagator{} }

type tenantPropagator struct{}

var errTenantPayload = errors.New("idempotency: the tenant header does not hold a string")

func (tenantPropagator) Inject(ctx context.Context, w workflow.HeaderWriter) error {
	if t, ok := TenantFromContext(ctx); ok {
		return writeTenant(t, w)
	}
	return nil
}

func (tenantPropagator) InjectFromWorkflow(ctx workflow.Context, w workflow.HeaderWriter) error {
	if t, ok := WorkflowTenant(ctx); ok {
		return writeTenant(t, w)
	}
	return nil
}

func (tenantPropagator) Extract(ctx context.Context, r workflow.HeaderReader) (context.Context, error) {
	t, ok, err := readTenant(r)
	if err != nil || !ok {
		return ctx, err
	}
	return WithTenant(ctx, t), nil
}

func (tenantPropagator) ExtractToWorkflow(ctx workflow.Context, r workflow.HeaderReader) (workflow.Context, error) {
	t, ok, err := readTenant(r)
	if err != nil || !ok {
		return ctx, err
	}
	return WithWorkflowTenant(ctx, t), nil
}

// The header is encoded with the default converter, never the user's: a
// payload codec (encryption) must not stand between a worker and the tenant
// it needs to scope a key.
func writeTenant(t string, w workflow.HeaderWriter) error {
	p, err := converter.GetDefaultDataConverter().ToPayload(t)
	if err != nil {
		return err
	}
	w.Set(TenantHeader, p)
	return nil
}

func readTenant(r workflow.HeaderReader) (string, bool, error) {
	p, ok := r.Get(TenantHeader)
	if !ok {
		return "", false, nil
	}
	var t string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &t); err != nil {
		return "", false, errors.Join(errTenantPayload, err)
	}
	return t, t != "", nil
}

// tenantProblemHeader carries, from a workflow that has no tenant to the
// calls it schedules, why its [TenantMemo] memo gave none, so that their
// error can say so. It never carries a tenant: a worker that does not know
// it ignores it.
const tenantProblemHeader = "idempotency-tenant-problem"

// tenantProblem returns what the tenantProblemHeader of an activity's
// header says, if anything.
func tenantProblem(ctx context.Context) string {
	p, ok := sdkinterceptor.Header(ctx)[tenantProblemHeader]
	if !ok {
		return ""
	}
	var s string
	if converter.GetDefaultDataConverter().FromPayload(p, &s) != nil {
		return ""
	}
	return s
}

// TenantFunc resolves the tenant an activity execution runs under. It
// reports false when there is none: then no key can be derived, and the
// execution is treated as the specification says for an underivable key.
type TenantFunc func(ctx context.Context, info sdkactivity.Info) (string, bool)

// TenantFromHeader is the default [TenantFunc]: the tenant carried by
// [TenantPropagator] from the workflow starter.
func TenantFromHeader(ctx context.Context, _ sdkactivity.Info) (string, bool) {
	return TenantFromContext(ctx)
}

// TenantFromNamespace is the [TenantFunc] for namespace-per-tenant
// deployments: the workflow's namespace is the tenant.
func TenantFromNamespace(_ context.Context, info sdkactivity.Info) (string, bool) {
	return info.Namespace, info.Namespace != ""
}

// noteIgnoredTenant reports EventTenantIgnored, once per dispatcher, when
// the worker's Options.Tenant resolved for the call a tenant other than the
// one its header carries: a worker that takes its tenant from the namespace
// (TenantFromNamespace) while the starter names another keeps the call's
// record, and its waiting work, where an operator who asks about the
// starter's tenant does not look.
func (x *execution) noteIgnoredTenant(ctx context.Context, resolved string) {
	if x.root.tenantFromHeader || x.nexus != nil {
		return
	}
	header, ok := TenantFromContext(ctx)
	if !ok || header == resolved || !x.root.tenantIgnored.CompareAndSwap(false, true) {
		return
	}
	e := x.rep.event
	e.Kind, e.Tenant = EventTenantIgnored, resolved
	e.Err = fmt.Errorf("the worker's Options.Tenant resolved tenant %q for activity %q where the call's header carries tenant %q (the starter's): "+
		"the header is ignored, and records and waiting work are kept under %q (idempotencyctl list -tenant %s); reported once per worker",
		resolved, x.decl.Name(), header, resolved, resolved)
	x.rep.emit(ctx, e)
}
