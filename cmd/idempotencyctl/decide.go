package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

// decideRequest is a parsed decide command.
type decideRequest struct {
	tenant, key string
	decision    decision.Decision
	// workflowID and runID, when set, name the workflow instead of the
	// record's origin.
	workflowID, runID string
	temporal          temporalConfig
	// yes confirms -free on an effect that may have landed.
	yes bool
}

func decideFlags(fs *flag.FlagSet, env func(string) string) func() (action, error) {
	tenant, key := scopeFlags(fs)
	outcome := fs.String("outcome", "", "the effect happened: this JSON value is what the activity returned")
	free := fs.Bool("free", false, "the effect did not happen: free the key; the activity runs again")
	retry := fs.Bool("retry", false, "the record was settled already (resolve): run the activity again, it answers from the record")
	fail := fs.Bool("fail", false, "give up: the waiting call fails with the indeterminate error")
	by := fs.String("by", "", "who decides: a person or system, for the workflow's log (required)")
	reason := fs.String("reason", "", "why: what established the outcome")
	reference := fs.String("reference", "", "where the evidence is: a ticket, the downstream's confirmation")
	workflowID := fs.String("workflow-id", "", "the workflow that waits, when the record does not name it (records written before they kept their origin)")
	runID := fs.String("run-id", "", "the run of -workflow-id that waits (default: its latest run)")
	yes := fs.Bool("yes", false, "confirm -free on an indeterminate record: if its effect did happen, the activity runs it a second time")
	tf := defineTemporalFlags(fs, env)
	return func() (action, error) {
		if err := checkScope(*tenant, *key); err != nil {
			return nil, err
		}
		outcomeSet := false
		fs.Visit(func(f *flag.Flag) { outcomeSet = outcomeSet || f.Name == "outcome" })
		var chosen []string
		for _, c := range []struct {
			on   bool
			name string
		}{{outcomeSet, "-outcome"}, {*free, "-free"}, {*retry, "-retry"}, {*fail, "-fail"}} {
			if c.on {
				chosen = append(chosen, c.name)
			}
		}
		switch {
		case len(chosen) == 0:
			return nil, errors.New("one of -outcome JSON (the effect happened), -free (it did not), -retry (settled already) or -fail (give up) is required")
		case len(chosen) > 1:
			return nil, fmt.Errorf("%s are exclusive: send one decision", strings.Join(chosen, " and "))
		case strings.TrimSpace(*by) == "":
			return nil, errors.New("-by is required: name who decides, for the workflow's log")
		case *runID != "" && *workflowID == "":
			return nil, errors.New("-run-id needs -workflow-id")
		}
		d := decision.Decision{Key: *key, Tenant: *tenant, By: *by, Reason: *reason, Reference: *reference}
		switch {
		case outcomeSet:
			var v any
			if err := decodeJSON([]byte(*outcome), &v); err != nil {
				return nil, outcomeError(*outcome, err)
			}
			compact, err := json.Marshal(v)
			if err != nil {
				return nil, outcomeError(*outcome, err)
			}
			d.Action, d.Result = decision.ActionComplete, compact
		case *free:
			d.Action = decision.ActionFree
		case *retry:
			d.Action = decision.ActionRetry
		default:
			d.Action = decision.ActionFail
		}
		tc, err := tf.resolve()
		if err != nil {
			return nil, err
		}
		req := decideRequest{tenant: *tenant, key: *key, decision: d, workflowID: *workflowID, runID: *runID, temporal: tc, yes: *yes}
		return func(ctx context.Context, b *backend, out io.Writer) error {
			return decide(ctx, b, out, req)
		}, nil
	}
}

// resolveHint says what an operator does when no workflow waits on an
// indeterminate (or stale pending) record.
const resolveHint = "settle the record in the store with '" + name + " resolve'"

// hintFor is what the operator can do when no workflow waits on the key:
// resolve, only when the record holds something to resolve.
func hintFor(rec store.Record, found bool) string {
	switch {
	case !found:
		return "there is no record to resolve either"
	case rec.State == store.StateCompleted:
		return "the record is completed: there is nothing to resolve"
	}
	return resolveHint
}

func decide(ctx context.Context, b *backend, out io.Writer, req decideRequest) error {
	rec, err := b.Lookup(ctx, store.LookupParams{Tenant: req.tenant, Key: req.key})
	found := err == nil
	hint := hintFor(rec, found)
	switch {
	case errors.Is(err, store.ErrNotFound) && req.workflowID != "":
		// Gone (expired, swept): the workflow named may still wait, and
		// a decision to complete records the outcome afresh.
		fmt.Fprintf(out, "record: tenant %s has no live record under key %s in %s\n", printable(req.tenant), printable(req.key), b.where)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w; if a workflow still waits on the key, name it with -workflow-id", noRecord(b, req.tenant, req.key))
	case err != nil:
		return err
	default:
		fmt.Fprintf(out, "record: tenant %s key %s is %s%s\n", printable(rec.Tenant), printable(rec.Key), rec.State, reasonSuffix(rec))
		if rec.State == store.StatePending {
			return errors.New("the record is pending: its holder may still be running, and no workflow waits on a decision for it (a stale one is settled with '" + name + " resolve')")
		}
	}
	// A record completed already may have been completed by this very
	// decision, sent before: its answer is found below, by its Update ID.
	settled := rec.State == store.StateCompleted && (req.decision.Action == decision.ActionComplete || req.decision.Action == decision.ActionFree)
	wfID, runID := rec.Origin.WorkflowID, rec.Origin.RunID
	if req.workflowID != "" {
		wfID, runID = req.workflowID, req.runID
	}
	if wfID == "" && rec.Origin.ActivityID != "" {
		// Made outside any workflow: by a standalone activity
		// (client.ExecuteActivity), whose ID this is, or by a Nexus
		// operation's handler, whose request ID it is. Nothing waits for a
		// decision but the caller, which has its error.
		return fmt.Errorf("the record was made outside any workflow, by %s %s (a standalone activity's ID, or a Nexus operation's request ID): no workflow waits on the key; %s",
			printableOrDash(rec.Origin.ActivityType), printable(rec.Origin.ActivityID), hint)
	}
	if wfID == "" {
		return errors.New("the record does not name its workflow (it was written before records kept their origin): pass -workflow-id, or " + hint)
	}
	where := "workflow " + printable(wfID)
	if runID != "" {
		where += " run " + printable(runID)
	}
	if req.decision.Action == decision.ActionFree && !req.yes && (rec.State == store.StateIndeterminate || !found) {
		// As forget: what cannot be taken back is confirmed on the command
		// line, naming what it costs.
		return errors.New(freeCost(req.key))
	}

	c, err := req.temporal.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	// The same decision sent before (run twice, or its answer lost):
	// Temporal keeps its result under the Update ID, ended workflow or not.
	if res, ok, err := decision.Earlier(ctx, c, wfID, runID, rec.Token, req.decision); err == nil && ok {
		fmt.Fprintf(out, "decided: %s answered: %s; %s (this decision was sent before: that is its answer, and nothing changed)\n",
			where, res.Applied, appliedMeaning(res.Applied))
		return nil
	}
	if settled {
		return errors.New("the record is completed already, by something other than this decision; if its workflow still waits, send -retry: the call answers from the record")
	}

	desc, err := c.DescribeWorkflowExecution(ctx, wfID, runID)
	var notFound *serviceerror.NotFound
	if reset := resetRun(desc, err); reset != "" && req.runID == "" {
		// Reset since the record was made: the run made by the reset
		// scopes its keys by the same original run and waits on the key
		// now (wire.RunScopeChangeID).
		runID, where = reset, "workflow "+printable(wfID)+" run "+printable(reset)+" (reset from "+printable(runID)+")"
		desc, err = c.DescribeWorkflowExecution(ctx, wfID, runID)
	}
	if err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW && req.runID == "" {
		// Keys scoped by workflow ID outlive a continue-as-new: the run
		// that waits now is the latest.
		runID, where = "", "workflow "+printable(wfID)
		desc, err = c.DescribeWorkflowExecution(ctx, wfID, "")
	}
	switch {
	case errors.As(err, &notFound):
		return fmt.Errorf("%s is not in namespace %s (ended and past its retention, or another -namespace): no workflow waits on the key; %s",
			where, printable(req.temporal.namespace), hint)
	case err != nil:
		return fmt.Errorf("cannot describe %s: %w", where, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if runID == "" {
		runID = info.GetExecution().GetRunId()
		where += " run " + printable(runID)
	}
	if s := info.GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("%s has ended (%s): no workflow waits on the key; %s", where, statusName(s), hint)
	}
	fmt.Fprintf(out, "sending: %s to %s (task queue %s)\n", describeDecision(req.decision), where, printable(info.GetTaskQueue()))

	res, err := decision.SendOnce(ctx, c, wfID, runID, rec.Token, req.decision)
	if err != nil {
		return updateError(ctx, c, wfID, runID, where, req, info.GetTaskQueue(), hint, err)
	}
	if res.Applied == decision.AppliedSignalled {
		fmt.Fprintf(out, "signalled: the server takes no Workflow Update, so the decision went to %s as a signal, which answers nothing; run '%s decide' again or look at the record to see whether it was taken\n", where, name)
		return nil
	}
	fmt.Fprintf(out, "decided: %s answered: %s; %s\n", where, res.Applied, appliedMeaning(res.Applied))
	return nil
}

// freeCost is the refusal of -free without -yes: what freeing an effect
// that did happen costs, and what to send instead.
func freeCost(key string) string {
	return "refusing to free key " + printable(key) + " without -yes: -free says the effect did not happen, and the activity runs again; " +
		"if it did happen (a card charged, a seat booked), it happens a second time — two charges, two bookings — and nothing undoes it. " +
		"Establish first that it did not (the downstream's own records; show prints the call), then run again with -yes; " +
		"if it did, send -outcome with what it returned"
}

// updateError explains why the decision update did not succeed.
func updateError(ctx context.Context, c client.Client, wfID, runID, where string, req decideRequest, queue, hint string, err error) error {
	var rejected *decision.RejectedError
	var app *temporal.ApplicationError
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &rejected) && strings.Contains(rejected.Reason, "is already decided ("):
		// Another decision was taken first: the workflow applies it, and
		// neither decide nor resolve has anything left to do (resolve
		// would find the record settled, or settle it against the
		// decision the workflow is applying).
		reason := strings.TrimPrefix(rejected.Reason, "idempotency: ")
		return fmt.Errorf("%s rejected the decision: %s: that decision was taken first and the workflow applies it; nothing more is needed: '%s show -tenant %s -key %s' shows the record as it settles",
			where, reason, name, printable(req.tenant), printable(req.key))
	case errors.As(err, &rejected):
		reason := strings.TrimPrefix(rejected.Reason, "idempotency: ")
		if !waitsOn(ctx, c, wfID, runID, req.key) {
			return fmt.Errorf("%s rejected the decision: %s; since nothing in it waits on the key, %s", where, reason, hint)
		}
		return fmt.Errorf("%s rejected the decision: %s", where, reason)
	case errors.As(err, &app) && strings.HasPrefix(app.Message(), "unknown update"):
		return fmt.Errorf("%s takes no %s update (it does not use AwaitDecision), so nothing waits on the key: %s",
			where, decision.UpdateName, hint)
	case errors.As(err, &notFound):
		return fmt.Errorf("%s ended before it took the decision: no workflow waits on the key; %s", where, hint)
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("interrupted while waiting for %s to answer; the decision may still be applied: look at the record again: %w", where, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, new(*client.WorkflowUpdateServiceTimeoutOrCanceledError)):
		return fmt.Errorf("%s did not answer the decision in time: is a worker polling task queue %s? It may still apply the decision once one does: look at the record before repeating it (%w)",
			where, printable(queue), context.DeadlineExceeded)
	}
	return fmt.Errorf("%s did not apply the decision: %w", where, err)
}

// waitsOn asks the workflow whether a call waits on key. It answers true
// when it cannot tell, so that only a known absence sends the operator to
// resolve.
func waitsOn(ctx context.Context, c client.Client, wfID, runID, key string) bool {
	waits, err := waitsOnKey(ctx, c, wfID, runID, key)
	return waits || err != nil
}

// waitsOnKey asks the workflow whether a call waits on key. A workflow that
// has ended, or takes no pending query, waits on nothing.
func waitsOnKey(ctx context.Context, c client.Client, wfID, runID, key string) (bool, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, wfID, runID)
	if reset := resetRun(desc, err); reset != "" {
		runID = reset
		desc, err = c.DescribeWorkflowExecution(ctx, wfID, runID)
	}
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return false, nil
	case err != nil:
		return false, err
	case desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return false, nil
	}
	pending, err := decision.Pending(ctx, c, wfID, runID)
	var qf *serviceerror.QueryFailed
	if errors.As(err, &qf) {
		return false, nil // no pending query: it does not use AwaitDecision
	}
	if err != nil {
		return false, err
	}
	for _, p := range pending {
		if p.Rejected == nil && p.Outcome.Key == key {
			return true, nil
		}
	}
	return false, nil
}

// resetRun returns the run a described run that ended was last reset to,
// if it was: the run that carries on its calls, and their keys.
func resetRun(desc *workflowservice.DescribeWorkflowExecutionResponse, err error) string {
	if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return ""
	}
	return desc.GetWorkflowExtendedInfo().GetResetRunId()
}

func describeDecision(d decision.Decision) string {
	if d.Action == decision.ActionComplete {
		return "complete with " + string(d.Result)
	}
	return string(d.Action)
}

func appliedMeaning(applied string) string {
	switch applied {
	case decision.AppliedRecorded:
		return "the result is recorded; the waiting call and every duplicate of the key receive it"
	case decision.AppliedFreed:
		return "the key is free; the activity runs again"
	case decision.AppliedRetried:
		return "the activity runs again and answers from the record as it stands"
	case decision.AppliedFailed:
		return "the waiting call fails with the indeterminate error"
	}
	return "the workflow applied it"
}

func statusName(s enumspb.WorkflowExecutionStatus) string {
	return strings.ToLower(s.String())
}
