package interceptor

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// TenantMemo is the memo field a workflow started without the tenant header
// may carry its tenant in, as a string: for example
//
//	temporal workflow start --memo-json '{"idempotency-tenant":"acme"}' ...
//
// The header wins over the memo, and the memo over Options.DefaultTenant.
const TenantMemo = "idempotency-tenant"

// workflowTenant returns ctx carrying the tenant the workflow runs under
// when its start carried no header: the memo's, or the worker's default.
// Both are read from the start event or the worker's configuration, so a
// replay finds the same tenant.
func (i *Interceptor) workflowTenant(ctx workflow.Context) workflow.Context {
	if _, ok := WorkflowTenant(ctx); ok {
		return ctx
	}
	if p, ok := workflow.GetInfo(ctx).Memo.GetFields()[TenantMemo]; ok {
		var t string
		if err := converter.GetDefaultDataConverter().FromPayload(p, &t); err == nil && t != "" {
			return WithWorkflowTenant(ctx, t)
		}
		workflow.GetLogger(ctx).Warn("idempotency: the tenant memo does not hold a tenant", "memo", TenantMemo)
	}
	if t := i.opts.DefaultTenant; t != "" {
		return WithWorkflowTenant(ctx, t)
	}
	return ctx
}
