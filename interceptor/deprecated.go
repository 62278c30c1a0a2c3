package interceptor

import "github.com/tesserix/idempotency/decision"

// The names and types of the decision protocol, which moved to package
// decision. They are kept here for one release so code written against
// earlier releases compiles; the wire names and JSON are unchanged.

// Deprecated: use [decision.QueryName].
const PendingQuery = decision.QueryName

// Deprecated: use [decision.UpdateName].
const DecisionUpdate = decision.UpdateName

// Deprecated: use [decision.SignalName].
const DecisionSignal = decision.SignalName

// Deprecated: use [decision.ResolveActivityName].
const ResolveActivityName = decision.ResolveActivityName

// Deprecated: use [decision.ErrorTypeRejected].
const DecisionRejectedErrorType = decision.ErrorTypeRejected

// Deprecated: use [decision.Action].
type Action = decision.Action

// Deprecated: use [decision.ActionComplete] and its siblings.
const (
	ActionComplete = decision.ActionComplete
	ActionFree     = decision.ActionFree
	ActionRetry    = decision.ActionRetry
	ActionFail     = decision.ActionFail
)

// Deprecated: use [decision.Decision].
type Decision = decision.Decision

// Deprecated: use [decision.AppliedRecorded] and its siblings.
const (
	AppliedRecorded = decision.AppliedRecorded
	AppliedFreed    = decision.AppliedFreed
	AppliedRetried  = decision.AppliedRetried
	AppliedFailed   = decision.AppliedFailed
)

// Deprecated: use [decision.Result].
type DecisionResult = decision.Result

// Deprecated: use [decision.PendingDecision].
type PendingDecision = decision.PendingDecision

// Deprecated: use [decision.RejectedDecision].
type RejectedDecision = decision.RejectedDecision

// Deprecated: use [decision.ResolveRequest].
type ResolveRequest = decision.ResolveRequest

// The error types, which moved to package decision's one list.
const (
	// Deprecated: use [decision.ErrorTypeKeyNotDerivable].
	ErrorTypeKeyNotDerivable = decision.ErrorTypeKeyNotDerivable
	// Deprecated: use [decision.ErrorTypeStoreUnavailable].
	ErrorTypeStoreUnavailable = decision.ErrorTypeStoreUnavailable
	// Deprecated: use [decision.ErrorTypeOutcomeUnreadable].
	ErrorTypeOutcomeUnreadable = decision.ErrorTypeOutcomeUnreadable
	// Deprecated: use [decision.ErrorTypeInvalidTenant].
	ErrorTypeInvalidTenant = decision.ErrorTypeInvalidTenant
	// Deprecated: use [decision.ErrorTypeNoTenant].
	ErrorTypeNoTenant = decision.ErrorTypeNoTenant
	// Deprecated: use [decision.ErrorTypeSuperseded].
	ErrorTypeSuperseded = decision.ErrorTypeSuperseded
	// Deprecated: use [decision.ErrorTypeNotLanded].
	ErrorTypeNotLanded = decision.ErrorTypeNotLanded
	// Deprecated: use [decision.ErrorTypeNotCommitted].
	ErrorTypeNotCommitted = decision.ErrorTypeNotCommitted
)
