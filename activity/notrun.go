package activity

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// ErrorTypeStoreUnavailable is the stable [temporal.ApplicationError] type
// of the error a declared execution fails with when the store did not answer
// before its body: the claim could not be made, so this attempt ran nothing.
// The error is retryable — running the call again is safe, because the claim
// decides then: a record of an earlier holder answers (or is indeterminate),
// and a free key is truly free — so the activity's retry policy applies to
// it as to any failure. A workflow that receives it (its retry policy ran
// out while the store stayed down) reads it with [AsNotRun] and may run the
// call again later. It will not change without a major version.
//
// It is never an indeterminate outcome: nothing is asked of a person. And a
// store that is down never reads as permission: the body never runs
// without a claim. One case of this type did run its body: a Transactional
// activity whose commit the store could not be asked about (NotRun's
// BodyEntered says so). Running it again is still safe: the next
// attempt's claim finds the record the commit did or did not complete.
const ErrorTypeStoreUnavailable = "IdempotencyStoreUnavailable"

// NotRun describes an execution that ran nothing because the store could
// not be asked, as the details of the [ErrorTypeStoreUnavailable] error.
type NotRun struct {
	// Activity is the activity type name.
	Activity string `json:"activity"`
	// Tenant scopes Key.
	Tenant string `json:"tenant,omitempty"`
	// Key is the idempotency key the execution would have claimed.
	Key string `json:"key,omitempty"`
	// Reason is ReasonStoreUnavailable.
	Reason Reason `json:"reason"`
	// BodyEntered is false: this attempt did not run the body. The one
	// exception is a Transactional activity whose body ran but whose
	// commit the store could not be asked about: BodyEntered and
	// EffectMayHaveLanded are then true, and running again is still safe,
	// because the next attempt's claim finds the record the commit did or
	// did not complete.
	BodyEntered bool `json:"body_entered"`
	// EffectMayHaveLanded is false: this attempt applied no effect. (An
	// earlier holder of the key may have; the claim of the next attempt
	// finds its record and answers from it, or reports it indeterminate.)
	EffectMayHaveLanded bool `json:"effect_may_have_landed"`
	// MayRetry is true: running the call again is safe.
	MayRetry bool `json:"may_retry"`
	// WorkflowID, RunID and ActivityID name the execution.
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	ActivityID string `json:"activity_id,omitempty"`
	// Cause is the message of the store's error.
	Cause string `json:"cause,omitempty"`
}

// Message returns the one-line description of the execution, its cause
// included.
func (n NotRun) Message() string {
	msg := n.summary()
	if n.Cause != "" {
		msg += ": " + n.Cause
	}
	return msg
}

func (n NotRun) summary() string {
	msg := fmt.Sprintf("activity %q was not run", n.Activity)
	if n.Key != "" {
		msg += fmt.Sprintf(" (tenant %q, key %s)", n.Tenant, n.Key)
	}
	return msg + fmt.Sprintf(": %s; this attempt ran nothing and applied no effect, so the call may be retried: "+
		"the claim decides then", n.Reason)
}

// NewNotRunError returns the retryable application error of type
// [ErrorTypeStoreUnavailable] carrying n (BodyEntered and
// EffectMayHaveLanded false, MayRetry true, whatever n says) and cause.
func NewNotRunError(n NotRun, cause error) error {
	n.BodyEntered, n.EffectMayHaveLanded, n.MayRetry = false, false, true
	if n.Reason == "" {
		n.Reason = ReasonStoreUnavailable
	}
	if cause != nil && n.Cause == "" {
		n.Cause = cause.Error()
	}
	if cause == nil {
		return temporal.NewApplicationError(n.Message(), ErrorTypeStoreUnavailable, n)
	}
	return temporal.NewApplicationErrorWithCause(n.summary(), ErrorTypeStoreUnavailable, cause, n)
}

// AsNotRun reports whether err, or an error it wraps, is the
// [ErrorTypeStoreUnavailable] error — on either side, as [AsIndeterminate]
// reads its own — and returns its details. Errors of that type written by
// releases that sent no details read with the message as Cause and
// MayRetry true. A timeout is never read as one, even when an earlier
// attempt's NotRun error is its cause: the attempt Temporal timed out may
// have run the body.
func AsNotRun(err error) (NotRun, bool) {
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return NotRun{}, false
	}
	var appErr *temporal.ApplicationError
	for {
		if !errors.As(err, &appErr) {
			return NotRun{}, false
		}
		if appErr.Type() == ErrorTypeStoreUnavailable {
			break
		}
		err = appErr.Unwrap()
	}
	n := NotRun{Reason: ReasonStoreUnavailable, MayRetry: true}
	if !appErr.HasDetails() || notRunDetails(appErr, &n) != nil {
		n = NotRun{Reason: ReasonStoreUnavailable, MayRetry: true, Cause: appErr.Error()}
	}
	return n, true
}

func notRunDetails(appErr *temporal.ApplicationError, n *NotRun) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("not-run details: %v", p)
		}
	}()
	return appErr.Details(n)
}
