package activity

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// ErrorTypeArgumentsMismatch is the stable [temporal.ApplicationError] type
// of the error a call fails with when the record under its key was made by
// a call with other values of the arguments its declaration checks
// ([Policy.CheckArguments]). It is not retryable: the record will not
// change its mind. Workflows may match on it by string;
// [AsArgumentsMismatch] does it for them. It will not change without a
// major version.
const ErrorTypeArgumentsMismatch = "IdempotencyArgumentsMismatch"

// The ways a call meets a record: ArgumentsMismatch.Found.
const (
	// FoundCompleted: the key's record was completed when the call claimed
	// it.
	FoundCompleted = "completed"
	// FoundWaited: the call waited for the key's holder, which completed
	// (or was marked indeterminate) under other arguments.
	FoundWaited = "waited"
	// FoundIndeterminate: the key's record is indeterminate, made by a call
	// with other arguments: deciding on it would answer this call with the
	// other call's effect.
	FoundIndeterminate = "indeterminate"
	// FoundTakeover: the key's holder is gone and the call would have taken
	// the key over (and, for an EFFECTFUL activity, asked its probe about
	// the other call's effect, or a person).
	FoundTakeover = "takeover"
)

// ArgumentsMismatch describes a call refused because the record under its
// key was made with other values of the checked arguments. It names the
// arguments, never their values: the record keeps only a digest of them.
// It travels as the details of the [ErrorTypeArgumentsMismatch] error.
type ArgumentsMismatch struct {
	// Activity is the activity type name.
	Activity string `json:"activity"`
	// Tenant and Key name the record.
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
	// Arguments are the checked arguments, as declared: one or more of
	// them differ.
	Arguments []string `json:"arguments"`
	// Found says how the call met the record (FoundCompleted,
	// FoundWaited, FoundIndeterminate or FoundTakeover).
	Found string `json:"found"`
	// RecordWorkflowID and RecordRunID name the execution that made the
	// record, when it kept its origin.
	RecordWorkflowID string `json:"record_workflow_id,omitempty"`
	RecordRunID      string `json:"record_run_id,omitempty"`
	// WorkflowID, RunID and ActivityID name the refused call.
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	ActivityID string `json:"activity_id,omitempty"`
}

// Message returns the one-line description of the mismatch.
func (m ArgumentsMismatch) Message() string {
	var b strings.Builder
	fmt.Fprintf(&b, "activity %q was called with other values of its checked arguments (%s) than the call that made the record",
		m.Activity, strings.Join(m.Arguments, ", "))
	fmt.Fprintf(&b, " of key %s (tenant %q, %s", m.Key, m.Tenant, m.Found)
	if m.RecordWorkflowID != "" {
		fmt.Fprintf(&b, ", made by workflow %q run %q", m.RecordWorkflowID, m.RecordRunID)
	}
	b.WriteString("); the record does not answer it and it will not be retried")
	return b.String()
}

// NewArgumentsMismatchError returns the non-retryable application error of
// type [ErrorTypeArgumentsMismatch] carrying m as its details.
func NewArgumentsMismatchError(m ArgumentsMismatch) error {
	return temporal.NewNonRetryableApplicationError(m.Message(), ErrorTypeArgumentsMismatch, nil, m)
}

// AsArgumentsMismatch reports whether err, or an error it wraps, is the
// arguments-mismatch error, and returns its details. Like
// [AsIndeterminate] it reads the error on either side of the activity.
func AsArgumentsMismatch(err error) (ArgumentsMismatch, bool) {
	var appErr *temporal.ApplicationError
	for {
		if !errors.As(err, &appErr) {
			return ArgumentsMismatch{}, false
		}
		if appErr.Type() == ErrorTypeArgumentsMismatch {
			break
		}
		err = appErr.Unwrap()
	}
	var m ArgumentsMismatch
	if appErr.HasDetails() {
		if derr := mismatchDetails(appErr, &m); derr != nil {
			m = ArgumentsMismatch{}
		}
	}
	return m, true
}

func mismatchDetails(appErr *temporal.ApplicationError, m *ArgumentsMismatch) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("arguments mismatch details: %v", p)
		}
	}()
	return appErr.Details(m)
}
