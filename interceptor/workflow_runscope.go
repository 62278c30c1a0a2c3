package interceptor

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// RunScopeChangeID is the workflow.GetVersion change ID under which a
// workflow records, at its first activity call, that the keys of its calls
// are scoped by its original run ID (version 1): the run ID its start event
// was written under, which a reset keeps (workflow.Info.OriginalRunID). Each
// call it schedules then carries that ID in the [RunScopeHeader] header, and
// under [ScopeRun] the dispatcher scopes the call's key by it, so a run made
// by `temporal workflow reset` finds the records of the run it was reset
// from instead of running their effects again. A run never reset has the
// same original and current run ID: its keys are what they were before.
// Continue-as-new and a workflow retry write a new start event, so their
// runs keep keys of their own.
//
// Histories recorded before (no marker: workflow.DefaultVersion) carry no
// header, and their calls stay scoped by the current run ID, so a running
// workflow's keys never move. A previous release replays the marker (the
// SDK skips version markers it does not ask for) and schedules calls
// without the header: for a run never reset, the keys it derives are the
// same.
const RunScopeChangeID = "idempotency.run-scope"

// FirstRunScopeChangeID is the workflow.GetVersion change ID under which a
// workflow of a worker with Options.Scope [ScopeFirstRun] records, at its
// first activity call, that the keys of its calls are scoped by the first
// run of its chain (workflow.Info.FirstRunID, which a workflow retry, a
// continue-as-new and a reset keep): each call carries that run ID in the
// [RunScopeHeader] header. A workflow without the marker scopes as
// [RunScopeChangeID] says, whatever the option later is, and one with it
// keeps the first run's scope on every worker. The previous release
// replays the marker (the SDK skips version markers it does not ask for)
// and its activity workers scope a call by the header's run ID, as they
// do a reset run's; switch the option on once every workflow worker runs
// a release that has it (a workflow worker of the previous release writes
// its own run's scope into the calls it schedules).
const FirstRunScopeChangeID = "idempotency.first-run-scope"

// RunScopeHeader is the header in which a workflow's calls carry the run ID
// their keys are scoped by (see [RunScopeChangeID]), as a string.
const RunScopeHeader = "idempotency-run-scope"

// markRunScope writes, into the header of a call the workflow schedules,
// the run ID its key is scoped by, asking the history once whether this
// workflow scopes by its original run ID.
func (o *workflowOutbound) markRunScope(ctx workflow.Context) {
	if !o.scopeKnown {
		o.scopeKnown = true
		if o.Next.GetVersion(ctx, RunScopeChangeID, workflow.DefaultVersion, 1) >= 1 {
			o.scopeRun = o.Next.GetInfo(ctx).OriginalRunID
		}
		// Off and not replaying: nothing to record. Replaying: the
		// history says, whatever the option.
		if o.root.opts.Scope == ScopeFirstRun || o.Next.IsReplaying(ctx) {
			if first := o.Next.GetInfo(ctx).FirstRunID; first != "" &&
				o.Next.GetVersion(ctx, FirstRunScopeChangeID, workflow.DefaultVersion, 1) >= 1 {
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
		h[RunScopeHeader] = p
	}
}

// headerRunScope returns the run ID the [RunScopeHeader] header of an
// activity's context scopes its key by, if it has one.
func headerRunScope(ctx context.Context) (string, bool, error) {
	p, ok := sdkinterceptor.Header(ctx)[RunScopeHeader]
	if !ok {
		return "", false, nil
	}
	var run string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &run); err != nil {
		return "", false, fmt.Errorf("idempotency: the %s header cannot be read: %w", RunScopeHeader, err)
	}
	if run == "" {
		return "", false, fmt.Errorf("idempotency: the %s header is empty", RunScopeHeader)
	}
	return run, true, nil
}
