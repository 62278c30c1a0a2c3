package decision

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// Pending asks the workflow workflowID (run runID; empty: its latest run)
// what it waits on: one entry per key a call waits on for a decision, then
// the decision signals it rejected lately (Rejected set). It sends the
// [QueryName] query, so a worker of the workflow must be polling.
func Pending(ctx context.Context, c client.Client, workflowID, runID string) ([]PendingDecision, error) {
	v, err := c.QueryWorkflow(ctx, workflowID, runID, QueryName)
	if err != nil {
		return nil, err
	}
	var pending []PendingDecision
	if err := v.Get(&pending); err != nil {
		return nil, fmt.Errorf("idempotency: reading the answer of query %s: %w", QueryName, err)
	}
	return pending, nil
}

// Send delivers d to the workflow workflowID (run runID; empty: its latest
// run) as the [UpdateName] update and returns what the workflow did. A
// decision the workflow's validator rejects comes back as a
// [*RejectedError], having changed nothing; any other error is the
// client's, unchanged (the workflow does not wait for decisions, has
// ended, no worker answered in time).
//
// When the server takes no Workflow Update (it answers Unimplemented, or
// the namespace has UpdateWorkflowExecution disabled), Send signals d as
// [SignalName] instead and returns a Result whose Applied is
// [AppliedSignalled]: a signal answers nothing, so ask [Pending] whether
// the key still waits, or was listed as rejected.
func Send(ctx context.Context, c client.Client, workflowID, runID string, d Decision) (Result, error) {
	var res Result
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		RunID:        runID,
		UpdateName:   UpdateName,
		Args:         []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if err == nil {
		return res, nil
	}
	if !updateUnavailable(err) {
		return Result{}, rejected(d.Key, err)
	}
	if serr := c.SignalWorkflow(ctx, workflowID, runID, SignalName, d); serr != nil {
		return Result{}, fmt.Errorf("idempotency: the server takes no update (%v), and the signal failed: %w", err, serr)
	}
	return Result{Key: d.Key, Action: d.Action, Applied: AppliedSignalled}, nil
}

// updateUnavailable reports an error with which the server refuses every
// Workflow Update: it has none, or the namespace has them disabled.
func updateUnavailable(err error) bool {
	var unimplemented *serviceerror.Unimplemented
	var denied *serviceerror.PermissionDenied
	return errors.As(err, &unimplemented) ||
		errors.As(err, &denied) && strings.Contains(denied.Message, "UpdateWorkflowExecution operation is disabled")
}
