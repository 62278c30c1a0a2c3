package decision

import (
	"encoding/json"
	"time"

	"github.com/tesserix/idempotency/activity"
)

// The names by which a person reaches a workflow waiting on a decision
// (interceptor.Options.AwaitDecision), and the activity that applies it.
// They are wire names: histories and clients of every release use them.
const (
	// QueryName is the query that answers with the workflow's
	// []PendingDecision: the keys it waits on, then the decisions it
	// rejected lately. It answers from the workflow's start, with an empty
	// list when nothing waits. [Pending] sends it.
	QueryName = "idempotency.pending"
	// UpdateName is the Workflow Update that carries a [Decision]. Its
	// validator rejects a malformed decision with the reason, writing
	// nothing to the history; an accepted one is applied and the update
	// returns a [Result]. The first decision accepted on a key wins: a
	// later one (an update or a signal) is rejected as already decided.
	// [Send] sends it.
	UpdateName = "idempotency.decide"
	// SignalName carries a [Decision], for clients without Workflow
	// Update. It is checked as the update is and accepted in the same step,
	// so of two decisions delivered together the first wins; a rejected
	// signal changes nothing, is logged, and is listed by [QueryName] with
	// its reason. [Send] falls back to it.
	SignalName = "idempotency.decision"
	// ResolveActivityName is the activity that records a decision in the
	// store; worker.New registers interceptor.Interceptor.ResolveActivity under it.
	ResolveActivityName = "idempotency.Resolve"
)

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

// Decision is the argument of [UpdateName] and the payload of [SignalName].
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

// What an accepted decision did, in Result.Applied.
const (
	// AppliedRecorded: the result was recorded against the key.
	AppliedRecorded = "recorded"
	// AppliedFreed: the key was freed; the activity runs again.
	AppliedFreed = "freed"
	// AppliedRetried: the activity runs again against the record as it is.
	AppliedRetried = "retried"
	// AppliedFailed: the waiting calls fail with the indeterminate error.
	AppliedFailed = "failed"
	// AppliedSignalled is set by [Send], never by a workflow: the server
	// takes no Workflow Update, so the decision went as a [SignalName]
	// signal, which answers nothing. The workflow checks it on arrival;
	// [Pending] lists it with its reason if the workflow rejected it.
	AppliedSignalled = "signalled"
)

// Result is what an accepted [UpdateName] returns.
type Result struct {
	Key    string `json:"key"`
	Action Action `json:"action"`
	// Applied is one of the Applied constants.
	Applied string `json:"applied"`
}

// PendingDecision is one entry of the [QueryName] answer: an effect the
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
	// wait on a key whose activity declares one is open
	// (wire.SettleChangeID).
	Probe *ProbeSchedule `json:"probe,omitempty"`
	// ResultExample is the shape of the result a complete decision takes:
	// the zero value of the activity's declared result type, as JSON
	// (`{"flight":"","seat":0}` for a struct, `""` for a string), to be
	// filled in with what the activity returned. Empty when the worker
	// that answered does not hold the activity's declaration, when the
	// activity returns no result (complete takes none), and in answers of
	// workers before 0.3.0.
	ResultExample json.RawMessage `json:"result_example,omitempty"`
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
