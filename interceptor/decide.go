package interceptor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/store"
)

// The names by which a person reaches a workflow waiting on a decision (see
// Options.AwaitDecision), and the activity that applies it.
const (
	// PendingQuery answers with the workflow's []PendingDecision: the
	// keys it waits on, then the decisions it rejected lately. It answers
	// from the workflow's start, with an empty list when nothing waits.
	PendingQuery = "idempotency.pending"
	// DecisionUpdate is the Workflow Update that carries a [Decision]. Its
	// validator rejects a malformed decision with the reason, writing
	// nothing to the history; an accepted one is applied and the update
	// returns a [DecisionResult].
	DecisionUpdate = "idempotency.decide"
	// DecisionSignal carries a [Decision], for clients without Workflow
	// Update. It is validated as the update is; a rejected signal changes
	// nothing, is logged, and is listed by [PendingQuery].
	DecisionSignal = "idempotency.decision"
	// ResolveActivityName is the activity that records a decision in the
	// store; worker.New registers [ResolveActivity] under it.
	ResolveActivityName = "idempotency.Resolve"
	// DecisionRejectedErrorType is the application error type with which
	// [DecisionUpdate] rejects a decision.
	DecisionRejectedErrorType = "IdempotencyDecisionRejected"
)

// maxRejected bounds how many rejected signals [PendingQuery] lists.
const maxRejected = 20

// Action is what a person decided about an effect whose outcome was unknown.
type Action string

// The actions a [Decision] can carry.
const (
	// ActionComplete: the effect happened and Decision.Result is what it
	// returned. The result is recorded against the key, so the waiting
	// call and every later duplicate receive it.
	ActionComplete Action = "complete"
	// ActionFree: the effect did not happen. The key is freed and the
	// activity runs again.
	ActionFree Action = "free"
	// ActionRetry: the record was already settled elsewhere (for instance
	// with idempotencyctl resolve); run the activity again, and it answers
	// from the record or runs afresh.
	ActionRetry Action = "retry"
	// ActionFail: give up; the call fails with the indeterminate error, as
	// it would have without AwaitDecision.
	ActionFail Action = "fail"
)

// Decision is the argument of [DecisionUpdate] and the payload of
// [DecisionSignal].
type Decision struct {
	// Key is the indeterminate key the decision is about, as the pending
	// decision names it.
	Key string `json:"key"`
	// Action is what was decided (case-insensitive).
	Action Action `json:"action"`
	// Result is the activity's result as JSON, required with
	// ActionComplete (write null for an activity whose result is a nil
	// pointer, and omit it for one that returns only an error). It must
	// decode into the activity's declared return type, unknown fields
	// refused, when the workflow worker holds the declaration.
	Result json.RawMessage `json:"result,omitempty"`
	// Tenant, if set, must be the tenant of the record.
	Tenant string `json:"tenant,omitempty"`
	// By names the person or system that decided; Reason says why;
	// Reference points at the evidence (a ticket, the downstream's
	// confirmation). They are logged by the workflow and by the Resolve
	// activity, never the arguments of the activity.
	By        string `json:"by,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Reference string `json:"reference,omitempty"`
}

// What an accepted decision did, in DecisionResult.Applied.
const (
	// AppliedRecorded: the result was recorded against the key.
	AppliedRecorded = "recorded"
	// AppliedFreed: the key was freed; the activity runs again.
	AppliedFreed = "freed"
	// AppliedRetried: the activity runs again against the record as it is.
	AppliedRetried = "retried"
	// AppliedFailed: the waiting calls fail with the indeterminate error.
	AppliedFailed = "failed"
)

// DecisionAudit is who decided what about a key, as [EventDecided]
// reports it. It never holds the result.
type DecisionAudit struct {
	Action    Action
	By        string
	Reason    string
	Reference string
}

// DecisionResult is what an accepted [DecisionUpdate] returns.
type DecisionResult struct {
	Key    string `json:"key"`
	Action Action `json:"action"`
	// Applied is one of the Applied constants.
	Applied string `json:"applied"`
}

// PendingDecision is one entry of the [PendingQuery] answer: an effect the
// workflow waits on a person for, or (Rejected set) a decision signal it
// refused.
type PendingDecision struct {
	Outcome activity.IndeterminateOutcome `json:"outcome"`
	// Since is the workflow time at which the wait began.
	Since time.Time `json:"since"`
	// Rejected is set on an entry that lists a rejected decision signal
	// rather than a wait.
	Rejected *RejectedDecision `json:"rejected,omitempty"`
}

// RejectedDecision is a decision signal the workflow refused.
type RejectedDecision struct {
	Decision Decision `json:"decision"`
	// Reason says why it was refused.
	Reason string `json:"reason"`
	// At is the workflow time at which it arrived.
	At time.Time `json:"at"`
}

// ResolveRequest is the input of the [ResolveActivityName] activity.
type ResolveRequest struct {
	Tenant    string          `json:"tenant"`
	Key       string          `json:"key"`
	Action    Action          `json:"action"`
	Result    json.RawMessage `json:"result,omitempty"`
	By        string          `json:"by,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Reference string          `json:"reference,omitempty"`
	// Token fences the decision to the indeterminate record it was made on
	// (IndeterminateOutcome.Token); zero applies it to whichever stands.
	Token int64 `json:"token,omitempty"`
}

// ResolveActivity returns the activity that records a person's decision in
// st, encoding a result with dc as the dispatcher encodes one (nil: as
// Options.DataConverter's nil does, the client's converter when the context
// carries it, else the default). A record that is no longer indeterminate (someone
// settled it already) or no longer exists is not an error: the workflow
// runs the activity again, which answers from whatever the record now says.
func ResolveActivity(st store.Store, dc converter.DataConverter) func(context.Context, ResolveRequest) error {
	return func(ctx context.Context, req ResolveRequest) error {
		p := store.ResolveParams{Tenant: req.Tenant, Key: req.Key, Token: req.Token,
			By: req.By, Reason: req.Reason, Reference: req.Reference}
		switch req.Action {
		case ActionComplete:
			outcome, err := EncodeOutcome((&Options{DataConverter: dc}).dataConverter(ctx), req.Result)
			if err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), "IdempotencyBadDecision", err)
			}
			// A record that expired or was swept meanwhile gets the
			// person's outcome: a freed key would run the effect again.
			p.Decision, p.Outcome, p.RecordIfGone = store.DecisionComplete, outcome, true
		case ActionFree:
			p.Decision = store.DecisionFree
		default:
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("idempotency: action %q records nothing", req.Action), "IdempotencyBadDecision", nil)
		}
		err := st.Resolve(ctx, p)
		switch {
		case errors.Is(err, store.ErrNotIndeterminate) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotHolder):
			// Settled already, gone, or a newer indeterminate record than
			// the one decided on (the fence held): nothing of this
			// decision applies; the call runs again and finds what stands.
			err = nil
		case errors.Is(err, store.ErrInvalid):
			// The store will refuse this decision every time.
			return temporal.NewNonRetryableApplicationError(err.Error(), "IdempotencyBadDecision", err)
		}
		if err == nil && sdkactivity.IsActivity(ctx) {
			sdkactivity.GetLogger(ctx).Info("idempotency: decision recorded",
				"tenant", req.Tenant, "key", req.Key, "action", string(req.Action),
				"by", req.By, "reason", req.Reason, "reference", req.Reference)
		}
		return err
	}
}

// register sets the query, the update and the signal that reach this
// workflow's waits.
func (o *workflowOutbound) register(ctx workflow.Context) {
	log := o.Next.GetLogger(ctx)
	if err := o.Next.SetQueryHandlerWithOptions(ctx, PendingQuery, o.pendingAnswer, workflow.QueryHandlerOptions{
		Description: "Lists the idempotency keys this workflow waits on a person's decision for, then the decision signals it rejected lately.",
	}); err != nil {
		log.Error("idempotency: cannot set the pending-decision query", "error", err)
	}
	if err := o.Next.SetUpdateHandler(ctx, DecisionUpdate, o.decideUpdate, workflow.UpdateHandlerOptions{
		Validator:   o.validateUpdate,
		Description: `Settles an indeterminate idempotency key this workflow waits on: {"key","action":"complete|free|retry|fail","result","by","reason","reference"}. Rejected with the reason when malformed.`,
	}); err != nil {
		log.Error("idempotency: cannot set the decision update", "error", err)
	}
	signals := o.Next.GetSignalChannelWithOptions(ctx, DecisionSignal, workflow.SignalChannelOptions{
		Description: "Fallback for clients without Workflow Update: a decision as " + DecisionUpdate + " takes it; a rejected one is logged and listed by " + PendingQuery + ".",
	})
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	o.Next.Go(dctx, "idempotency:decisions", func(ctx workflow.Context) {
		for {
			var d Decision
			var raw json.RawMessage
			signals.Receive(ctx, &raw)
			reason := ""
			if err := strictJSON(raw, &d); err != nil {
				reason = "the signal is not a decision: " + err.Error()
			} else if err := o.validate(&d); err != nil {
				reason = err.Error()
			}
			if reason != "" {
				o.Next.GetLogger(ctx).Warn("idempotency: a decision signal was rejected", "key", d.Key, "reason", reason)
				o.rejected = append(o.rejected, PendingDecision{
					Outcome:  activity.IndeterminateOutcome{Key: d.Key},
					Since:    o.Next.Now(ctx),
					Rejected: &RejectedDecision{Decision: d, Reason: reason, At: o.Next.Now(ctx)},
				})
				if len(o.rejected) > maxRejected {
					o.rejected = slices.Delete(o.rejected, 0, len(o.rejected)-maxRejected)
				}
				continue
			}
			o.Next.Go(ctx, "idempotency:decide", func(ctx workflow.Context) { _, _ = o.apply(ctx, d) })
		}
	})
}

func (o *workflowOutbound) pendingAnswer() ([]PendingDecision, error) {
	keys := o.openKeys()
	out := make([]PendingDecision, 0, len(keys)+len(o.rejected))
	for _, k := range keys {
		out = append(out, o.waits[k].pending)
	}
	return append(out, o.rejected...), nil
}

// The update takes the decision as raw JSON, so a misspelt field is
// refused rather than dropped.
func (o *workflowOutbound) validateUpdate(_ workflow.Context, raw json.RawMessage) error {
	_, err := o.decode(raw)
	return err
}

func (o *workflowOutbound) decideUpdate(ctx workflow.Context, raw json.RawMessage) (DecisionResult, error) {
	// Validated already; the state may have moved between the validator
	// and the handler within one task.
	d, err := o.decode(raw)
	if err != nil {
		return DecisionResult{}, err
	}
	return o.apply(ctx, d)
}

// decode reads and validates a decision, as the update's rejection.
func (o *workflowOutbound) decode(raw json.RawMessage) (Decision, error) {
	var d Decision
	err := strictJSON(raw, &d)
	if err != nil {
		err = fmt.Errorf("idempotency: not a decision: %w", err)
	} else {
		err = o.validate(&d)
	}
	if err != nil {
		return d, temporal.NewNonRetryableApplicationError(err.Error(), DecisionRejectedErrorType, nil)
	}
	return d, nil
}

// validate normalises d.Action and reports why d cannot be applied, if it
// cannot. It reads the workflow's state and changes nothing.
func (o *workflowOutbound) validate(d *Decision) error {
	d.Action = Action(strings.ToLower(strings.TrimSpace(string(d.Action))))
	w := o.waits[d.Key]
	switch {
	case d.Key == "":
		return errors.New("idempotency: the decision names no key")
	case w == nil:
		return fmt.Errorf("idempotency: no call is waiting on key %s (query %s lists the keys)", d.Key, PendingQuery)
	case w.decision != nil:
		return fmt.Errorf("idempotency: key %s is already decided (%s)", d.Key, w.decision.Action)
	case d.Tenant != "" && d.Tenant != w.pending.Outcome.Tenant:
		return fmt.Errorf("idempotency: key %s belongs to another tenant than %q", d.Key, d.Tenant)
	}
	switch d.Action {
	case ActionComplete:
		return o.checkResult(w.pending.Outcome.Activity, d.Result)
	case ActionFree, ActionRetry, ActionFail:
		if len(d.Result) > 0 {
			return fmt.Errorf("idempotency: action %s takes no result", d.Action)
		}
		return nil
	}
	return fmt.Errorf("idempotency: unknown action %q (complete, free, retry or fail)", d.Action)
}

// checkResult reports whether raw is an explicit result that decodes into
// the declared return type of the activity, when this worker holds its
// declaration.
func (o *workflowOutbound) checkResult(activityType string, raw json.RawMessage) error {
	var out reflect.Type
	known := false
	if decl, ok := o.root.Declaration(activityType); ok {
		if ft := reflect.TypeOf(decl.Func()); ft != nil && ft.Kind() == reflect.Func {
			known = true
			if ft.NumOut() == 2 {
				out = ft.Out(0)
			}
		}
	}
	if known && out == nil {
		if len(raw) > 0 {
			return fmt.Errorf("idempotency: activity %s returns no result; complete takes none", activityType)
		}
		return nil
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return fmt.Errorf("idempotency: complete needs a result: what activity %s returned, as JSON", activityType)
	}
	if !known {
		if !json.Valid(raw) {
			return errors.New("idempotency: the result is not JSON")
		}
		return nil
	}
	if err := strictJSON(raw, reflect.New(out).Interface()); err != nil {
		return fmt.Errorf("idempotency: the result does not decode into %s, what activity %s returns: %w", out, activityType, err)
	}
	return nil
}

// strictJSON decodes one JSON value into v, refusing unknown fields and
// trailing data.
func strictJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the value")
	}
	return nil
}

// apply records a validated decision once for its key and releases the
// calls waiting on it.
func (o *workflowOutbound) apply(ctx workflow.Context, d Decision) (DecisionResult, error) {
	w := o.waits[d.Key]
	w.decision = &d
	o.publish(ctx)
	out := w.pending.Outcome
	o.Next.GetLogger(ctx).Info("idempotency: decision accepted",
		"activity", out.Activity, "tenant", out.Tenant, "key", d.Key, "action", string(d.Action),
		"by", d.By, "reason", d.Reason, "reference", d.Reference)
	res := DecisionResult{Key: d.Key, Action: d.Action}
	switch d.Action {
	case ActionComplete, ActionFree:
		req := ResolveRequest{Tenant: out.Tenant, Key: d.Key, Action: d.Action, Result: d.Result,
			By: d.By, Reason: d.Reason, Reference: d.Reference, Token: out.Token}
		rctx := workflow.WithActivityOptions(ctx, resolveOptions)
		w.err = o.Next.ExecuteActivity(rctx, ResolveActivityName, req).Get(ctx, nil)
		res.Applied = AppliedRecorded
		if d.Action == ActionFree {
			res.Applied = AppliedFreed
		}
	case ActionRetry:
		res.Applied = AppliedRetried
	default:
		res.Applied = AppliedFailed
	}
	w.applied = true
	if obs := o.root.opts.Observer; obs != nil && !o.Next.IsReplaying(ctx) {
		info := o.Next.GetInfo(ctx)
		obs.Observe(context.Background(), Event{
			Kind: EventDecided, Activity: out.Activity, Tenant: out.Tenant, Key: d.Key,
			WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			Err:      w.err,
			Decision: &DecisionAudit{Action: d.Action, By: d.By, Reason: d.Reason, Reference: d.Reference},
		})
	}
	if w.err != nil {
		return DecisionResult{}, w.err
	}
	return res, nil
}
