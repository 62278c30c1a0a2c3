package interceptor

import (
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/internal/wire"
)

// TenantMemo is the memo field a workflow started without the tenant header
// may carry its tenant in, as a string. The temporal CLI encodes each
// --memo KEY=VALUE with VALUE read as JSON, so the tenant is quoted:
//
//	temporal workflow start --memo 'idempotency-tenant="acme"' ...
//
// The header wins over the memo, and the memo over Options.DefaultTenant. A
// memo that holds no tenant (not a string, or empty) leaves the workflow
// without one, whatever DefaultTenant says: whoever set it meant to name a
// tenant, and running under the worker's instead would guess.
const TenantMemo = "idempotency-tenant"

// tenantSource says where a workflow's tenant came from.
type tenantSource uint8

const (
	tenantNone       tenantSource = iota
	tenantFromHeader              // the start's header
	tenantFromMemo                // the start's memo
	tenantRecorded                // the DefaultTenant recorded under wire.TenantChangeID
	tenantConfigured              // DefaultTenant as the replaying worker has it (histories before wire.TenantChangeID)
)

// workflowTenant returns ctx carrying the tenant the workflow runs under
// when its start carried no header: the memo's, or the worker's default as
// the history fixed it. It remembers in o where the tenant came from, and
// why there is none if there is none.
func (i *Interceptor) workflowTenant(ctx workflow.Context, o *workflowOutbound) workflow.Context {
	if _, ok := WorkflowTenant(ctx); ok {
		o.tenantSource = tenantFromHeader
		return ctx
	}
	memo, problem := memoTenant(workflow.GetInfo(ctx).Memo)
	if problem == "" && memo != "" {
		o.tenantSource, o.tenant = tenantFromMemo, memo
		return WithWorkflowTenant(ctx, memo)
	}
	// What is left comes from the worker's configuration, which a redeploy
	// may change under a running workflow: fix it by the history. Recorded
	// with no default too: a workflow that started without a tenant keeps
	// none, rather than take whatever default each later worker has and
	// derive its keys under a different tenant at each redeploy.
	if o.Next.GetVersion(ctx, wire.TenantChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// Recorded before the tenant was fixed by the history: as then.
		if problem != "" {
			o.Next.GetLogger(ctx).Warn("idempotency: the tenant memo does not hold a tenant", "memo", TenantMemo, "problem", problem)
		}
		if t := i.opts.DefaultTenant; t != "" {
			o.tenantSource, o.tenant = tenantConfigured, t
			return WithWorkflowTenant(ctx, t)
		}
		return ctx
	}
	if problem != "" {
		o.tenantProblem = "its memo " + TenantMemo + " holds no tenant: " + problem
		return ctx
	}
	var t string
	if err := o.Next.SideEffect(ctx, func(workflow.Context) any { return i.opts.DefaultTenant }).Get(&t); err != nil {
		// Only a history that was tampered with holds something else.
		o.tenantProblem = "the recorded default tenant cannot be read: " + err.Error()
		return ctx
	}
	if t == "" {
		return ctx
	}
	o.tenantSource, o.tenant = tenantRecorded, t
	return WithWorkflowTenant(ctx, t)
}

// libraryContext returns the context the library's own activities
// (Resolve, Probe) are scheduled with from the workflow's handlers and
// goroutines: with the tenant the workflow's calls run under, which those
// activities are bound to. A tenant from the start's header is in every
// context of the workflow already; one from the memo or the worker's
// default was put only in the context the workflow's code runs with.
func (o *workflowOutbound) libraryContext(ctx workflow.Context) workflow.Context {
	if o.tenant == "" {
		return ctx
	}
	return WithWorkflowTenant(ctx, o.tenant)
}

// memoTenant reads the tenant of a [TenantMemo] memo: the tenant, or why
// the memo holds none ("" and "" when there is no such memo). The memo is
// read as the temporal CLI and the SDK's clients write it: a JSON string.
func memoTenant(memo *commonpb.Memo) (tenant, problem string) {
	p, ok := memo.GetFields()[TenantMemo]
	if !ok {
		return "", ""
	}
	if err := converter.GetDefaultDataConverter().FromPayload(p, &tenant); err != nil {
		return "", err.Error()
	}
	if tenant == "" {
		return "", "it is empty"
	}
	return tenant, ""
}

// markTenantProblem writes, into the header of a call a workflow without a
// tenant schedules, why its memo gave none, so the call's error can say.
func (o *workflowOutbound) markTenantProblem(ctx workflow.Context) {
	if o.tenantProblem == "" {
		return
	}
	h := sdkinterceptor.WorkflowHeader(ctx)
	if h == nil {
		return
	}
	if p, err := converter.GetDefaultDataConverter().ToPayload(o.tenantProblem); err == nil {
		h[tenantProblemHeader] = p
	}
}

// rerunContext returns the context a call run again after a person's
// decision on out runs with. A workflow whose history predates
// wire.TenantChangeID took its tenant from the configuration of the worker that
// replays it, which may differ from the one out's record was made under (a
// DefaultTenant changed by a redeploy): the call then runs under the
// record's tenant, so it finds what the person decided instead of deriving
// its key under another tenant. Only where the tenant travels as it is
// (Options.Tenant is TenantFromHeader): a TenantFunc that maps the header
// to a tenant would map out.Tenant again. Headers do not take part in the
// SDK's replay checks, so a changed one is no non-determinism.
func (o *workflowOutbound) rerunContext(ctx workflow.Context, out activity.IndeterminateOutcome) workflow.Context {
	if o.tenantSource != tenantConfigured || !o.root.tenantFromHeader || out.Tenant == "" {
		return ctx
	}
	if t, _ := WorkflowTenant(ctx); t == out.Tenant {
		return ctx
	}
	o.Next.GetLogger(ctx).Warn("idempotency: running the call again under the tenant of the decided record, not the worker's DefaultTenant",
		"tenant", out.Tenant, "key", out.Key)
	return WithWorkflowTenant(ctx, out.Tenant)
}
