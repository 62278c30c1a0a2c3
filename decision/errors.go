package decision

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
)

// The types of every [temporal.ApplicationError] the library fails a call
// with, in one block: a workflow matches on them with
// [temporal.ApplicationError.Type] (or errors.As and the helpers named
// here). They are stable: none changes without a major version.
//
// Three are in Temporal's benign category
// (temporal.ApplicationErrorCategoryBenign), because they are the library
// working as designed and resolve without anyone acting, so the SDK logs
// them at debug and leaves them out of its failure metrics:
// [ErrorTypeSuperseded] and [ErrorTypeNotLanded] (retryable: the retry is
// answered from the record, or runs the effect that did not land) and
// [ErrorTypeRejected] (a person's decision the workflow refused). Every
// other is not: each may fail a workflow, which the SDK must count, or
// asks an operator to act (the library's own events and metrics report
// all of them too).
const (
	// ErrorTypeIndeterminateOutcome: the effect of an EFFECTFUL call is one
	// nobody can state; a person decides. Non-retryable.
	// [activity.AsIndeterminate] reads its details.
	ErrorTypeIndeterminateOutcome = activity.ErrorTypeIndeterminateOutcome
	// ErrorTypeNotLanded: an EFFECTFUL activity's outcome would have been
	// indeterminate and its declaration's probe answered that the effect
	// did not land: the key is freed, and the activity's retry policy runs
	// it again (retryable). A body that failed with a non-retryable error
	// of its own returns that error instead, and is not retried.
	ErrorTypeNotLanded = "IdempotencyEffectNotLanded"
	// ErrorTypeKeyNotDerivable: no key could be derived (a named key
	// argument is absent, a value with no canonical form, no workflow run)
	// for an IDEMPOTENT activity. Retryable.
	ErrorTypeKeyNotDerivable = "IdempotencyKeyNotDerivable"
	// ErrorTypeStoreUnavailable: the store could not be reached before a
	// declared activity's body ran, so the attempt ran nothing; for every
	// kind. Or, the one case whose body ran (activity.NotRun.BodyEntered),
	// a Transactional activity's commit the store could not be asked
	// about. Retryable either way: running the call again is safe, its
	// claim decides then. [activity.AsNotRun] reads its details; a
	// workflow that waits for decisions runs the call again after a timer,
	// nobody asked.
	ErrorTypeStoreUnavailable = activity.ErrorTypeStoreUnavailable
	// ErrorTypeOutcomeUnreadable: a recorded outcome could not be decoded
	// (the data converter changed incompatibly). Non-retryable.
	ErrorTypeOutcomeUnreadable = "IdempotencyOutcomeUnreadable"
	// ErrorTypeInvalidTenant: the execution's tenant breaks a rule every
	// store applies (empty, longer than store.MaxTenantLength bytes, not
	// UTF-8, a NUL byte). Non-retryable, for every kind: it would be
	// refused forever. A configuration error: the body never ran, so no
	// person need decide anything.
	ErrorTypeInvalidTenant = "IdempotencyInvalidTenant"
	// ErrorTypeNoTenant: no tenant could be resolved for the execution
	// (see interceptor.TenantFunc for the ways a workflow carries one).
	// Non-retryable, for every kind, where the tenant travels in the
	// activity's header, which every retry carries unchanged; retryable
	// where the worker's own Options.Tenant function resolved none, which
	// a redeployed worker can fix and the next attempt reaches. A
	// configuration error: the body never ran, and a workflow that waits
	// for decisions does not wait on it.
	ErrorTypeNoTenant = "IdempotencyNoTenant"
	// ErrorTypeSuperseded: the body of an IDEMPOTENT activity was stopped
	// because its claim was taken over while it ran. Retryable: the retry
	// waits for the caller that took the key over and gets its answer.
	ErrorTypeSuperseded = "IdempotencySuperseded"
	// ErrorTypeNotCommitted: a transactional activity
	// (activity.Policy.Transactional) returned but its transaction did not
	// commit — the commit failed, or its answer was lost and the record
	// showed it had not landed. Nothing of the body landed and the key was
	// freed: retryable, the retry policy runs it again.
	ErrorTypeNotCommitted = "IdempotencyNotCommitted"
	// ErrorTypeArgumentsMismatch: the record under the call's key was made
	// by a call with other values of the arguments its declaration checks
	// (activity.Policy.CheckArguments). Non-retryable: the record will not
	// change its mind. [activity.AsArgumentsMismatch] reads its details.
	ErrorTypeArgumentsMismatch = activity.ErrorTypeArgumentsMismatch
	// ErrorTypeRejected: the workflow's validator rejected a decision sent
	// as the [UpdateName] update; nothing was written to its history.
	// [Send] returns it as a [*RejectedError].
	ErrorTypeRejected = "IdempotencyDecisionRejected"
	// ErrorTypeBadDecision: the Resolve activity was given a decision the
	// store refuses every time (a result the data converter cannot encode,
	// an action that records nothing). Non-retryable.
	ErrorTypeBadDecision = "IdempotencyBadDecision"
	// ErrorTypeForeignRecord: a request to the library's own activities
	// ([ResolveActivityName], [ProbeActivityName]) named a record the
	// execution that scheduled it may not touch: another tenant's than the
	// one it runs under, or one another workflow made. Nothing was read or
	// written. Non-retryable. Operators settle any record with
	// idempotencyctl, which holds the store's credentials.
	ErrorTypeForeignRecord = "IdempotencyForeignRecord"
	// ErrorTypeUnknownKeySecret: the workflow's keys are derived under a
	// secret (interceptor.Options.KeySecret) of a generation the worker
	// that got the call does not hold. The body did not run and nothing
	// was recorded. Retryable: a worker that holds the secret runs the
	// retry; give every worker of the task queue every generation its
	// running workflows were keyed under (interceptor.Options.KeySecrets).
	ErrorTypeUnknownKeySecret = "IdempotencyUnknownKeySecret"
)

// RejectedError is the error [Send] returns when the workflow's validator
// rejected the decision: it was malformed, named no waiting key, came
// second, or its result does not decode into the activity's return type.
// Nothing was written to the workflow's history.
type RejectedError struct {
	// Key is the key the rejected decision named.
	Key string
	// Reason is the workflow's reason, as its validator gave it.
	Reason string
	err    error
}

// Error implements error.
func (e *RejectedError) Error() string {
	return fmt.Sprintf("idempotency: the decision on key %s was rejected: %s", e.Key, e.Reason)
}

// Unwrap returns the workflow's application error.
func (e *RejectedError) Unwrap() error { return e.err }

// rejected reports err as a *RejectedError when it is the validator's
// rejection of a decision on key, and otherwise returns err unchanged.
func rejected(key string, err error) error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == ErrorTypeRejected {
		return &RejectedError{Key: key, Reason: app.Message(), err: err}
	}
	return err
}
