package interceptor

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/internal/wire"
)

// markRunScope writes, into the header of a call the workflow schedules,
// the run ID its key is scoped by, asking the history once whether this
// workflow scopes by its original run ID.
func (o *workflowOutbound) markRunScope(ctx workflow.Context) {
	if !o.scopeKnown {
		o.scopeKnown = true
		if o.Next.GetVersion(ctx, wire.RunScopeChangeID, workflow.DefaultVersion, 1) >= 1 {
			o.scopeRun = o.Next.GetInfo(ctx).OriginalRunID
		}
		// Off and not replaying: nothing to record. Replaying: the
		// history says, whatever the option.
		if o.root.opts.Scope == ScopeFirstRun || o.Next.IsReplaying(ctx) {
			if first := o.Next.GetInfo(ctx).FirstRunID; first != "" &&
				o.Next.GetVersion(ctx, wire.FirstRunScopeChangeID, workflow.DefaultVersion, 1) >= 1 {
				o.scopeRun = first
			}
		}
	}
	if o.scopeRun == "" {
		return
	}
	h := sdkinterceptor.WorkflowHeader(ctx)
	if h == nil {
		return
	}
	if p, err := converter.GetDefaultDataConverter().ToPayload(o.scopeRun); err == nil {
		h[wire.RunScopeHeader] = p
	}
}

// headerRunScope returns the run ID the [wire.RunScopeHeader] header of an
// activity's context scopes its key by, if it has one.
func headerRunScope(ctx context.Context) (string, bool, error) {
	p, ok := sdkinterceptor.Header(ctx)[wire.RunScopeHeader]
	if !ok {
		return "", false, nil
	}
	var run string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &run); err != nil {
		return "", false, fmt.Errorf("idempotency: the %s header cannot be read: %w", wire.RunScopeHeader, err)
	}
	if run == "" {
		return "", false, fmt.Errorf("idempotency: the %s header is empty", wire.RunScopeHeader)
	}
	return run, true, nil
}
