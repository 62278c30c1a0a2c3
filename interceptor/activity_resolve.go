package interceptor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

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
	// returns a [DecisionResult]. The first decision accepted on a key wins:
	// a later one (an update or a signal) is rejected as already decided.
	DecisionUpdate = "idempotency.decide"
	// DecisionSignal carries a [Decision], for clients without Workflow
	// Update. It is checked as the update is and accepted in the same step,
	// so of two decisions delivered together the first wins; a rejected
	// signal changes nothing, is logged, and is listed by [PendingQuery]
	// with its reason.
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
	// By names the person or system that decided, and is required; Reason
	// says why; Reference points at the evidence (a ticket, the
	// downstream's confirmation). They are logged by the workflow and by
	// the Resolve activity and kept with the record, never the arguments of
	// the activity.
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
	// (or a probe's answer that came after a decision) rather than a wait.
	Rejected *RejectedDecision `json:"rejected,omitempty"`
	// Probe says where asking the activity's probe again stands, while a
	// wait on a key whose activity declares one is open (SettleChangeID).
	Probe *ProbeSchedule `json:"probe,omitempty"`
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
	// Check and Retention (IndeterminateOutcome's) are kept with the record
	// a complete decision makes when the key's record is gone.
	Check     string        `json:"check,omitempty"`
	Retention time.Duration `json:"retention,omitempty"`
	// Outcome, when set with ActionComplete, is the result already encoded
	// as the dispatcher records one (a probe's answer, see ProbeReply); it
	// is recorded as it is, and Result is only for reading.
	Outcome []byte `json:"outcome,omitempty"`
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
			By: req.By, Reason: req.Reason, Reference: req.Reference, Check: req.Check, Retention: req.Retention}
		switch req.Action {
		case ActionComplete:
			outcome, err := req.Outcome, error(nil)
			if len(outcome) == 0 {
				outcome, err = EncodeOutcome((&Options{DataConverter: dc}).dataConverter(ctx), req.Result)
			}
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
