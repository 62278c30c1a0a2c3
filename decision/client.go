package decision

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	return send(ctx, c, workflowID, runID, "", d)
}

func send(ctx context.Context, c client.Client, workflowID, runID, updateID string, d Decision) (Result, error) {
	var res Result
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     updateID,
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

// UpdateID is the Update ID [SendOnce] sends d with: derived from the key,
// the token of the record the decision was made on, the action and the
// result (compacted, so that spacing does not make two decisions), never
// from who decided or why. Two people who decide the same thing about the
// same record send the same Update, and Temporal applies it once.
func UpdateID(token int64, d Decision) string {
	h := sha256.New()
	result := d.Result
	var compact bytes.Buffer
	if json.Compact(&compact, d.Result) == nil {
		result = compact.Bytes()
	}
	for _, part := range [][]byte{[]byte(d.Tenant), []byte(d.Key), []byte(strconv.FormatInt(token, 10)), []byte(d.Action), result} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write(part)
	}
	return "idempotency-decide-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Earlier returns the result of a decision sent before with [SendOnce] (the
// same token and decision) to the workflow workflowID (run runID), and
// whether there was one. It finds it after the workflow has ended too, as
// long as the run is within its namespace's retention. An error is returned
// only when the server could not be asked; an Update it does not know is
// (Result{}, false, nil).
func Earlier(ctx context.Context, c client.Client, workflowID, runID string, token int64, d Decision) (Result, bool, error) {
	h := c.GetWorkflowUpdateHandle(client.GetWorkflowUpdateHandleOptions{
		WorkflowID: workflowID, RunID: runID, UpdateID: UpdateID(token, d),
	})
	var res Result
	err := h.Get(ctx, &res)
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		return res, true, nil
	case errors.As(err, &notFound):
		return Result{}, false, nil
	}
	var rej *RejectedError
	if r := rejected(d.Key, err); errors.As(r, &rej) {
		// An earlier identical decision was rejected: sending it again
		// would be rejected for the same reason, or accepted if the
		// workflow's state has changed since; let Send say which.
		return Result{}, false, nil
	}
	return Result{}, false, err
}

// SendOnce is [Send] with the Update ID [UpdateID] derives from token, the
// token of the record d was made on: sent again — by an operator who runs
// the same decide twice, or after a connection dropped — Temporal answers
// with the first one's result instead of deciding twice. Call [Earlier]
// first to find the answer of one sent before the workflow ended.
func SendOnce(ctx context.Context, c client.Client, workflowID, runID string, token int64, d Decision) (Result, error) {
	return send(ctx, c, workflowID, runID, UpdateID(token, d), d)
}
