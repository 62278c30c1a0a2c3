package interceptor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/internal/wire"
)

// The handlers' descriptions, which the Web UI and the temporal CLI show
// beside them (the workflow's metadata query): what each is for and, for
// the Update, a decision ready to paste.
const (
	queryDescription = "The calls of this workflow that wait for a person's decision: each one's key, activity, " +
		"reason, and whether its effect may have landed. Decide one with the " + decision.UpdateName + " Update."
	updateDescription = "Decide a call that waits for a person (its key from the " + decision.QueryName + " query). " +
		`Input, ready to paste: {"key":"v1:...","action":"complete","result":"<the activity's result, as JSON>",` +
		`"by":"you@example.com","reason":"confirmed with the downstream"}. ` +
		"action: complete (the effect happened: result is what the activity returned), free (it did not: run it again), " +
		"retry (the record was settled elsewhere: run the call again), fail (give up: the workflow gets the error). " +
		"A malformed decision is refused with its reason and changes nothing."
	signalDescription = "For clients without Workflow Update: the same decision as the " + decision.UpdateName +
		" Update, as JSON; a rejected one is listed, with its reason, in the " + decision.QueryName + " query's answer."
)

// register sets the query, the update and the signal that reach this
// workflow's waits, each with its description. The SDK marks the
// description options experimental; there is no other way to give the
// handlers one, and none of them writes to the history.
func (o *workflowOutbound) register(ctx workflow.Context) {
	log := o.Next.GetLogger(ctx)
	if err := o.Next.SetQueryHandlerWithOptions(ctx, decision.QueryName, o.pendingAnswer,
		workflow.QueryHandlerOptions{Description: queryDescription}); err != nil {
		log.Error("idempotency: cannot set the pending-decision query", "error", err)
	}
	if err := o.Next.SetUpdateHandler(ctx, decision.UpdateName, o.decideUpdate, workflow.UpdateHandlerOptions{
		Validator:   o.validateUpdate,
		Description: updateDescription,
	}); err != nil {
		log.Error("idempotency: cannot set the decision update", "error", err)
	}
	signals := o.Next.GetSignalChannelWithOptions(ctx, decision.SignalName, workflow.SignalChannelOptions{Description: signalDescription})
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	o.Next.Go(dctx, "idempotency:decisions", func(ctx workflow.Context) {
		for {
			var raw json.RawMessage
			signals.Receive(ctx, &raw)
			asBefore := o.Next.GetVersion(ctx, wire.DecisionChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion
			o.letWaitsOpen(ctx, raw)
			if asBefore {
				o.takeSignalAsBefore(ctx, raw)
				continue
			}
			o.takeSignal(ctx, raw)
		}
	})
}

// letWaitsOpen gives the workflow's calls a turn before a decision signal
// that names a key no call waits on is taken, by the rules of
// wire.DecisionOrderChangeID version 1: a call whose failure arrived in the same
// workflow task as the signal opens its wait in that turn. It returns at
// once for a signal that names a waited-on key, or none.
func (o *workflowOutbound) letWaitsOpen(ctx workflow.Context, raw json.RawMessage) {
	var d decision.Decision
	if strictJSON(raw, &d) != nil || d.Key == "" || o.waits[d.Key] != nil {
		return
	}
	if o.Next.GetVersion(ctx, wire.DecisionOrderChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	// The first check of the condition yields; the dispatcher runs every
	// other coroutine before it asks again, and the calls that the task's
	// events unblocked run to their waits (nothing between a call's
	// failure and the opening of its wait blocks). A second turn is not
	// waited for: a key still without a wait then has no call coming.
	// (ctx is the signal loop's, disconnected: Await cannot be cancelled.)
	turned := false
	_ = o.Next.Await(ctx, func() bool {
		if o.waits[d.Key] != nil || turned {
			return true
		}
		turned = true
		return false
	})
}

// takeSignal takes a decision signal by the rules of wire.DecisionChangeID
// version 1: checked and, if it may be applied, accepted in one step, with
// the verdict that depends on declarations recorded; then applied.
func (o *workflowOutbound) takeSignal(ctx workflow.Context, raw json.RawMessage) {
	var d decision.Decision
	w, err := o.acceptable(raw, &d)
	if err == nil && d.Action == decision.ActionComplete {
		err = o.recordedVerdict(ctx, w, &d)
	}
	if err == nil {
		err = checkBy(&d)
	}
	if err != nil {
		o.reject(ctx, d, err.Error())
		return
	}
	o.accept(ctx, w, &d)
	o.Next.Go(ctx, "idempotency:decide", func(ctx workflow.Context) { _, _ = o.apply(ctx, w, d) })
}

// takeSignalAsBefore takes a decision signal as the router did before
// wire.DecisionChangeID, for histories recorded then: checked on arrival, with
// the declarations of the worker at hand, and accepted later, when the
// goroutine that applies it runs.
func (o *workflowOutbound) takeSignalAsBefore(ctx workflow.Context, raw json.RawMessage) {
	var d decision.Decision
	reason := ""
	if err := strictJSON(raw, &d); err != nil {
		reason = "the signal is not a decision: " + err.Error()
	} else if err := o.validate(&d); err != nil {
		reason = err.Error()
	}
	if reason != "" {
		o.reject(ctx, d, reason)
		return
	}
	o.Next.Go(ctx, "idempotency:decide", func(ctx workflow.Context) {
		w := o.waits[d.Key]
		if w == nil {
			// The wait ended (its timeout) before the decision ran: the
			// router of then failed this task over a nil wait; nothing
			// of it can apply.
			return
		}
		o.accept(ctx, w, &d)
		_, _ = o.apply(ctx, w, d)
	})
}

// recordedVerdict checks a complete decision's result against the
// activity's declared return type, when this worker holds the declaration,
// and records the verdict in the history (a side effect), so a replay by a
// worker with other declarations reads the verdict that was given instead
// of giving another.
func (o *workflowOutbound) recordedVerdict(ctx workflow.Context, w *wait, d *decision.Decision) error {
	activityType, result := w.pending.Outcome.Activity, d.Result
	var verdict string
	if err := o.Next.SideEffect(ctx, func(workflow.Context) any {
		if err := (declaredResults{o.root}).check(activityType, result); err != nil {
			return err.Error()
		}
		return ""
	}).Get(&verdict); err != nil {
		return fmt.Errorf("idempotency: reading the recorded verdict on the decision: %w", err)
	}
	if verdict != "" {
		return errors.New(verdict)
	}
	return nil
}

// reject lists a refused decision signal, with its reason, in the pending
// query's answer, and logs it.
func (o *workflowOutbound) reject(ctx workflow.Context, d decision.Decision, reason string) {
	o.Next.GetLogger(ctx).Warn("idempotency: a decision signal was rejected", "key", d.Key, "by", d.By, "reason", reason)
	o.rejected = append(o.rejected, decision.PendingDecision{
		Outcome:  activity.IndeterminateOutcome{Key: d.Key},
		Since:    o.Next.Now(ctx),
		Rejected: &decision.RejectedDecision{Decision: d, Reason: reason, At: o.Next.Now(ctx)},
	})
	if len(o.rejected) > maxRejected {
		o.rejected = slices.Delete(o.rejected, 0, len(o.rejected)-maxRejected)
	}
}

func (o *workflowOutbound) pendingAnswer() ([]decision.PendingDecision, error) {
	keys := o.openKeys()
	out := make([]decision.PendingDecision, 0, len(keys)+len(o.rejected))
	for _, k := range keys {
		p := o.waits[k].pending
		// Filled as the query is answered, never kept: a query writes
		// nothing to the history, so the declarations it reads may differ
		// between deployments.
		p.ResultExample = declaredResults{o.root}.example(p.Outcome.Activity)
		out = append(out, p)
	}
	return append(out, o.rejected...), nil
}

// validateUpdate is the update's validator: everything a decision is
// checked for, the declarations of this worker included. The SDK runs it
// only when the update arrives, never on replay, so what it reads may
// change between deployments. The update takes the decision as raw JSON,
// so a misspelt field is refused rather than dropped.
func (o *workflowOutbound) validateUpdate(_ workflow.Context, raw json.RawMessage) error {
	var d decision.Decision
	return rejection(o.checkDecision(raw, &d))
}

// checkDecision decodes raw into d and reports why it cannot be applied,
// if it cannot: acceptable, then the result against the declarations this
// worker holds, then who decided. It changes nothing.
func (o *workflowOutbound) checkDecision(raw json.RawMessage, d *decision.Decision) error {
	w, err := o.acceptable(raw, d)
	if err == nil && d.Action == decision.ActionComplete {
		err = declaredResults{o.root}.check(w.pending.Outcome.Activity, d.Result)
	}
	if err == nil {
		err = checkBy(d)
	}
	return err
}

// decideUpdate is the update's handler. It runs on replay too, where the
// validator does not: it reads only what the history holds (the wait it
// decides and the decision itself), never the worker's declarations, so an
// update accepted by a worker without them replays on one with them. It
// accepts the decision in the step that runs the validator, before any
// other decision can be taken.
func (o *workflowOutbound) decideUpdate(ctx workflow.Context, raw json.RawMessage) (decision.Result, error) {
	var d decision.Decision
	w, err := o.acceptable(raw, &d)
	if err != nil {
		return decision.Result{}, rejection(err)
	}
	o.accept(ctx, w, &d)
	return o.apply(ctx, w, d)
}

// rejection is err as the update's rejection, nil for nil.
func rejection(err error) error {
	if err == nil {
		return nil
	}
	// Benign (see decision.ErrorTypeRejected): a refused decision is the
	// validator working, not the workflow failing.
	return temporal.NewApplicationErrorWithOptions(err.Error(), decision.ErrorTypeRejected, temporal.ApplicationErrorOptions{
		NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign,
	})
}

// acceptable decodes raw into d and reports the wait it decides, or why it
// cannot be applied, from the workflow's state and the decision alone (no
// configuration). It changes nothing.
func (o *workflowOutbound) acceptable(raw json.RawMessage, d *decision.Decision) (*wait, error) {
	if err := strictJSON(raw, d); err != nil {
		return nil, fmt.Errorf("idempotency: not a decision: %w", err)
	}
	return o.checkState(d)
}

// checkBy reports a decision that does not say who made it.
func checkBy(d *decision.Decision) error {
	if strings.TrimSpace(d.By) == "" {
		return fmt.Errorf("idempotency: the decision on key %s names no one: set by, who decided", d.Key)
	}
	return nil
}

// checkState normalises d.Action and reports why d cannot be applied to
// the workflow's state, if it cannot, and otherwise the wait it decides.
// It reads the waits and the decision, never the worker's configuration,
// and changes nothing.
func (o *workflowOutbound) checkState(d *decision.Decision) (*wait, error) {
	d.Action = decision.Action(strings.ToLower(strings.TrimSpace(string(d.Action))))
	w := o.waits[d.Key]
	switch {
	case d.Key == "":
		return nil, errors.New("idempotency: the decision names no key")
	case w == nil:
		return nil, fmt.Errorf("idempotency: no call is waiting on key %s (query %s lists the keys)", d.Key, decision.QueryName)
	case w.decision != nil:
		by := ""
		if w.decision.By != "" {
			by = " by " + w.decision.By
		}
		return nil, fmt.Errorf("idempotency: key %s is already decided (%s%s)", d.Key, w.decision.Action, by)
	case d.Tenant != "" && d.Tenant != w.pending.Outcome.Tenant:
		return nil, fmt.Errorf("idempotency: key %s belongs to another tenant than %q", d.Key, d.Tenant)
	}
	switch d.Action {
	case decision.ActionComplete:
		return w, nil
	case decision.ActionFree, decision.ActionRetry, decision.ActionFail:
		if len(d.Result) > 0 {
			return nil, fmt.Errorf("idempotency: action %s takes no result", d.Action)
		}
		return w, nil
	}
	return nil, fmt.Errorf("idempotency: unknown action %q (complete, free, retry or fail)", d.Action)
}

// validate is checkState, then, for a complete decision, declaredResults.check: the
// check of decision signals before wire.DecisionChangeID.
func (o *workflowOutbound) validate(d *decision.Decision) error {
	w, err := o.checkState(d)
	if err == nil && d.Action == decision.ActionComplete {
		err = declaredResults{o.root}.check(w.pending.Outcome.Activity, d.Result)
	}
	return err
}

// accept marks w decided by d. Called in the step that checked d, it makes
// d the first and only decision on its key: every later one finds the key
// decided.
func (o *workflowOutbound) accept(ctx workflow.Context, w *wait, d *decision.Decision) {
	w.decision = d
	if w.cancelProbe != nil && d.By != decision.ProbeDecider {
		// A person decided first: the probe is asked no more. (A probe's
		// own decision ends its schedule by returning.)
		w.cancelProbe()
	}
	o.publish(ctx)
}

// apply records an accepted decision once for its key and releases the
// calls waiting on it.
func (o *workflowOutbound) apply(ctx workflow.Context, w *wait, d decision.Decision) (decision.Result, error) {
	out := w.pending.Outcome
	o.Next.GetLogger(ctx).Info("idempotency: decision accepted",
		"activity", out.Activity, "tenant", out.Tenant, "key", d.Key, "action", string(d.Action),
		"by", d.By, "reason", d.Reason, "reference", d.Reference)
	res := decision.Result{Key: d.Key, Action: d.Action}
	switch d.Action {
	case decision.ActionComplete, decision.ActionFree:
		req := decision.ResolveRequest{Tenant: out.Tenant, Key: d.Key, Action: d.Action, Result: d.Result,
			By: d.By, Reason: d.Reason, Reference: d.Reference, Token: out.Token,
			Check: out.Check, Retention: out.Retention}
		opts := resolveOptions
		if o.settles(ctx) {
			opts = settledResolveOptions
			opts.Summary = fmt.Sprintf("idempotency: recording the decision on key %s (%s by %s)", d.Key, d.Action, d.By)
			if w.token != 0 {
				req.Token = w.token
			}
			req.Outcome = w.outcome
		}
		rctx := workflow.WithActivityOptions(o.libraryContext(ctx), opts)
		w.err = o.Next.ExecuteActivity(rctx, decision.ResolveActivityName, req).Get(ctx, nil)
		res.Applied = decision.AppliedRecorded
		if d.Action == decision.ActionFree {
			res.Applied = decision.AppliedFreed
		}
	case decision.ActionRetry:
		res.Applied = decision.AppliedRetried
	default:
		res.Applied = decision.AppliedFailed
	}
	w.applied = true
	if obs := o.root.opts.Observer; obs != nil && !o.Next.IsReplaying(ctx) {
		info := o.Next.GetInfo(ctx)
		var kind activity.Kind // UNKNOWN where this worker does not declare the activity
		if decl, ok := o.root.Declaration(out.Activity); ok {
			kind = decl.Kind()
		}
		obs.Observe(context.Background(), Event{
			Kind: EventDecided, Activity: out.Activity, ActivityKind: kind, Tenant: out.Tenant, Key: d.Key,
			WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			Err:      w.err,
			Decision: &DecisionAudit{Action: d.Action, By: d.By, Reason: d.Reason, Reference: d.Reference},
		})
	}
	if w.err != nil {
		return decision.Result{}, w.err
	}
	return res, nil
}
