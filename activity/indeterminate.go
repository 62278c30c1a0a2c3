package activity

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
)

// ErrorTypeIndeterminateOutcome is the stable [temporal.ApplicationError]
// type of the error an execution fails with when its effect is one nobody can
// state. Workflows may match on it by string; [AsIndeterminate] does it for
// them. It will not change without a major version. The decision package
// lists it with every other error type of the library.
const ErrorTypeIndeterminateOutcome = "IndeterminateOutcomeError"

// Reason says why an outcome is indeterminate.
type Reason string

// The reasons an outcome can be indeterminate.
const (
	// ReasonBodyFailed: the body of an EFFECTFUL activity failed, panicked or
	// was cancelled; its effect may have landed.
	ReasonBodyFailed Reason = "body_failed"
	// ReasonKeyNotDerivable: no key could be derived (a named key argument
	// is absent, a value has no canonical form), so the execution could not
	// be deduplicated. An execution with no tenant, or one no store
	// accepts, fails with the interceptor's configuration errors instead
	// (IdempotencyNoTenant, IdempotencyInvalidTenant): no person decides
	// those.
	ReasonKeyNotDerivable Reason = "key_not_derivable"
	// ReasonStoreUnavailable: the store could not be reached. A store that
	// is down does not read as permission.
	ReasonStoreUnavailable Reason = "store_unavailable"
	// ReasonHolderLost: the execution holding the key stopped answering
	// (its lease ran out, or it was an earlier attempt that Temporal gave up
	// on) without recording an outcome.
	ReasonHolderLost Reason = "holder_lost"
	// ReasonRecorded: an earlier execution left the key indeterminate and no
	// person has resolved it yet.
	ReasonRecorded Reason = "recorded"
)

// IndeterminateOutcome describes an effect whose outcome nobody can state. It
// travels as the details of the [ErrorTypeIndeterminateOutcome] application
// error, so the workflow and the person it routes the decision to see the
// same fields.
type IndeterminateOutcome struct {
	// Activity is the activity type name.
	Activity string `json:"activity"`
	// Tenant scopes Key; empty when the tenant could not be resolved.
	Tenant string `json:"tenant,omitempty"`
	// Key is the idempotency key; empty when none could be derived.
	Key string `json:"key,omitempty"`
	// Reason says why the outcome is unknown.
	Reason Reason `json:"reason"`
	// BodyEntered reports whether this execution (this attempt) ran the
	// activity's body. False means this attempt caused no effect; it says
	// nothing of earlier holders of the key: read EffectMayHaveLanded.
	BodyEntered bool `json:"body_entered"`
	// EffectMayHaveLanded reports whether any execution — this attempt, an
	// earlier one, or a duplicate that held the key — may have applied the
	// effect. False only when the dispatcher knows no body ran under the key
	// (no key could be derived). A person deciding reads this field.
	EffectMayHaveLanded bool `json:"effect_may_have_landed"`
	// WorkflowID, RunID and ActivityID name the execution that failed.
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	ActivityID string `json:"activity_id,omitempty"`
	// Cause is the message of the error behind the outcome, if any.
	Cause string `json:"cause,omitempty"`
	// Token is the fencing token of the indeterminate record standing
	// under Key when the outcome was reported (zero when there is none). A
	// decision made on this outcome carries it, so it applies to that
	// record only, never to a newer one nobody has looked at.
	Token int64 `json:"token,omitempty"`
	// Check is the digest of the call's checked arguments (never their
	// values), and Retention its declared retention window: a decision that
	// records an outcome on a key whose record is gone makes a record that
	// keeps both, as the call's claim would have.
	Check     string        `json:"check,omitempty"`
	Retention time.Duration `json:"retention,omitempty"`
	// Probe reports that the activity's declaration has a probe: a
	// workflow waiting for a person on this outcome asks it again on a
	// schedule (wire.SettleChangeID), and the first definite answer
	// settles the key unless a person decided first.
	Probe bool `json:"probe,omitempty"`
}

// Message returns the one-line description of the outcome, its cause
// included.
func (o IndeterminateOutcome) Message() string {
	msg := o.summary()
	if o.Cause != "" {
		msg += ": " + o.Cause
	}
	return msg
}

// summary is Message without the cause, for an error that carries its cause
// as an error of its own and prints it after the summary.
func (o IndeterminateOutcome) summary() string {
	var known string
	switch {
	case o.BodyEntered:
		known = "this attempt ran the body, so the effect may have landed"
	case o.EffectMayHaveLanded:
		known = "this attempt did not run the body, but an earlier holder of the key may have applied the effect"
	default:
		known = "no attempt ran the body, so no effect was applied"
	}
	msg := fmt.Sprintf("indeterminate outcome of activity %q", o.Activity)
	if o.Key != "" {
		msg += fmt.Sprintf(" (tenant %q, key %s)", o.Tenant, o.Key)
	}
	return msg + fmt.Sprintf(": %s; %s; it will not be retried", o.Reason, known)
}

// NewIndeterminateError returns the non-retryable application error of type
// [ErrorTypeIndeterminateOutcome] carrying o as its details and cause as its
// cause. The dispatcher returns it; it is exported for activities and tests
// that need to raise the same signal.
func NewIndeterminateError(o IndeterminateOutcome, cause error) error {
	if cause == nil {
		return temporal.NewNonRetryableApplicationError(o.Message(), ErrorTypeIndeterminateOutcome, nil, o)
	}
	if o.Cause == "" {
		o.Cause = cause.Error()
	}
	// The application error prints its cause after the message.
	return temporal.NewNonRetryableApplicationError(o.summary(), ErrorTypeIndeterminateOutcome, cause, o)
}

// AsIndeterminate reports whether err, or an error it wraps, is the
// indeterminate-outcome error, and returns its details. It reads the error on
// either side: as the activity returned it, or as a workflow receives it from
// workflow.ExecuteActivity (wrapped in a *temporal.ActivityError), also when
// a workflow made it the cause of an application error of its own.
//
// It also reads a call of an EFFECTFUL activity whose attempts Temporal
// ended with a timeout (the retry policy run out): the
// *temporal.TimeoutError carries the dispatcher's [TimeoutMarker] in its
// last heartbeat details, and the outcome has Reason [ReasonTimedOut], the
// key, the call's Check and Retention, and EffectMayHaveLanded set; its
// Token is zero (no record was read). A timeout without the marker (an
// undeclared activity, or a dispatcher of an earlier release) is not
// indeterminate.
func AsIndeterminate(err error) (IndeterminateOutcome, bool) {
	var appErr *temporal.ApplicationError
	orig := err
	for {
		if !errors.As(err, &appErr) {
			return timedOut(orig)
		}
		if appErr.Type() == ErrorTypeIndeterminateOutcome {
			break
		}
		err = appErr.Unwrap()
	}
	var o IndeterminateOutcome
	if appErr.HasDetails() {
		if derr := details(appErr, &o); derr != nil {
			// The type string is the promise; details from a foreign sender
			// may not decode. Keep what the message says.
			o = IndeterminateOutcome{Cause: appErr.Error()}
		}
	}
	return o, true
}

// details reads appErr's details into o. An error built in this process
// (not yet encoded) keeps its details as Go values, and the SDK assigns
// them by reflection, panicking when their type is not o's; that reads as
// an error here.
func details(appErr *temporal.ApplicationError, o *IndeterminateOutcome) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("indeterminate outcome details: %v", p)
		}
	}()
	return appErr.Details(o)
}
