package interceptor

import (
	"context"
	"time"

	"github.com/tesserix/idempotency/activity"
)

// EventKind names what the dispatcher did with one execution.
type EventKind uint8

// The events the dispatcher reports.
const (
	// EventClaimed: the execution took the key; its body is about to run.
	EventClaimed EventKind = iota + 1
	// EventDeduplicated: a recorded outcome answered the execution; the body
	// was not entered (the specification's TOOL_DEDUPLICATED).
	EventDeduplicated
	// EventWaiting: another caller holds the key; the execution waits for
	// its answer instead of running alongside it.
	EventWaiting
	// EventTakenOver: the execution took the key over from a holder that is
	// gone and runs the body: an IDEMPOTENT activity, or a transactional
	// one whose record only transactions touched (an EFFECTFUL takeover
	// that marks the key reports EventIndeterminate instead).
	EventTakenOver
	// EventCompleted: the body returned and its outcome was recorded.
	EventCompleted
	// EventReleased: the body failed and the key was freed for a retry.
	EventReleased
	// EventIndeterminate: an effect whose outcome nobody can state; the run
	// stops with the indeterminate error (the specification's
	// TOOL_INDETERMINATE).
	EventIndeterminate
	// EventStoreError: a call to the store failed.
	EventStoreError
	// EventOrphaned: the body returned but the store could not take the
	// write that settles its claim — its outcome, the indeterminate mark,
	// or freeing the key (the release of a transactional body's claim
	// included). The dispatcher keeps trying in the background for
	// Options.OrphanRetry (EventCompleted or EventReleased follows if the
	// write lands; the indeterminate mark is only counted); until then the
	// claim stays pending, and a duplicate that finds its lease run out
	// declares the holder lost.
	EventOrphaned
	// EventSuperseded: the execution's claim was taken over while its body,
	// its transaction's commit or its probe ran (its lease ran out and
	// another caller superseded it); the body's context was cancelled with
	// [ErrSuperseded] and nothing it returned is recorded. Reported once the
	// body has returned; an EFFECTFUL body stopped half-way then reports
	// EventIndeterminate as its end.
	EventSuperseded
	// EventDecided: a workflow accepted a person's decision on an
	// indeterminate key (see Options.AwaitDecision); Event.Decision says who
	// decided what, and why. Reported by the workflow when the decision has
	// been applied (Err set if it could not be), not on replay.
	EventDecided
	// EventProbeLanded: an EFFECTFUL outcome would have been indeterminate
	// (Event.Reason says why) and the declaration's probe answered that the
	// effect landed: its result is recorded (EventCompleted follows) and
	// returned as a duplicate's answer would be.
	EventProbeLanded
	// EventProbeNotLanded: the probe answered that the effect did not land:
	// the key is freed (EventReleased follows) and the call fails with the
	// retryable ErrorTypeNotLanded error, so its retry policy runs it again.
	EventProbeNotLanded
	// EventProbeUnsettled: the probe could not tell or failed (Event.Err
	// says how); the outcome is indeterminate as without a probe
	// (EventIndeterminate follows).
	EventProbeUnsettled
	// EventProbeLate: the probe did not answer within its time — the
	// activity's remaining time less a margin to report it, or StoreTimeout
	// when the body had outlived the activity — and was given up on
	// (Event.Err says so); the outcome is indeterminate as without a probe
	// (EventIndeterminate follows). Its slowness is its own: the store
	// writes after it get their own StoreTimeout.
	EventProbeLate
	// EventMisconfigured: the execution was refused before any store call
	// because the configuration gives it no tenant a key can be scoped by:
	// none could be resolved ([decision.ErrorTypeNoTenant]), or one no store accepts
	// ([decision.ErrorTypeInvalidTenant]). Event.Err says which, and how to give
	// one. The body did not run and nothing was recorded: it is no
	// indeterminate outcome, and nobody is asked to decide.
	EventMisconfigured
	// EventArgumentsMismatch: the record under the execution's key was made
	// by a call with other values of the declaration's checked arguments
	// (Policy.CheckArguments); the execution fails with the non-retryable
	// activity.ErrorTypeArgumentsMismatch error (Event.Err), naming the
	// arguments, never their values, and the record is left as it is. It
	// is reported on every path that answers from a record: a completed
	// one, a holder waited for, an indeterminate one, a takeover.
	EventArgumentsMismatch
	// EventWaited: a wait for another holder of the key ended (its answer
	// came, its lease ran out, or the key was freed); Event.Duration is how
	// long it lasted. EventWaiting reported its start.
	EventWaited
	// EventLeaseLapsed: the store acknowledged no renewal of the
	// execution's claim for four fifths of a lease, so the lease may run
	// out while the body runs; the body's context is cancelled with
	// [ErrLeaseLapsed] (Event.Err says why), before another caller may
	// take the key over. The claim is settled as usual when the body
	// returns; an EFFECTFUL body that failed is indeterminate
	// (ReasonHolderLost).
	EventLeaseLapsed
	// EventForeignRecord: a request to the library's own activities
	// (idempotency.Resolve, idempotency.Probe) named a record the
	// scheduling execution may not touch — another tenant's, or another
	// workflow's — and was refused with the non-retryable
	// [decision.ErrorTypeForeignRecord] error (Event.Err says which);
	// nothing was read or written. Event.Tenant and Event.Key are the
	// request's; WorkflowID and RunID the scheduling workflow's.
	EventForeignRecord
	// EventNotRun: the attempt ran nothing and holds no claim: the store
	// could not say whether the key is free (Event.Err; the outage's
	// EventStoreError events come before it), or no key could be derived
	// for an IDEMPOTENT or transactional activity (an EFFECTFUL one reports
	// EventIndeterminate). The call fails with a retryable error.
	EventNotRun
	// EventTenantIgnored: the worker's Options.Tenant function resolved a
	// tenant other than the one the call's header carries (the starter's
	// interceptor.WithTenant): the header is ignored, and the call's record
	// — and any work waiting for a person — is kept under Event.Tenant, not
	// under the tenant the starter named. Event.Err names both. Reported
	// once per dispatcher (the first such call), not as the call's end; the
	// call goes on. idempotencyctl's list of an empty tenant names the
	// tenants that have records.
	EventTenantIgnored
)

// String returns the event's name.
func (k EventKind) String() string {
	switch k {
	case EventClaimed:
		return "claimed"
	case EventDeduplicated:
		return "deduplicated"
	case EventWaiting:
		return "waiting"
	case EventTakenOver:
		return "taken_over"
	case EventCompleted:
		return "completed"
	case EventReleased:
		return "released"
	case EventIndeterminate:
		return "indeterminate"
	case EventStoreError:
		return "store_error"
	case EventOrphaned:
		return "orphaned"
	case EventSuperseded:
		return "superseded"
	case EventDecided:
		return "decided"
	case EventProbeLanded:
		return "probe_landed"
	case EventProbeNotLanded:
		return "probe_not_landed"
	case EventProbeUnsettled:
		return "probe_unsettled"
	case EventProbeLate:
		return "probe_late"
	case EventMisconfigured:
		return "misconfigured"
	case EventArgumentsMismatch:
		return "arguments_mismatch"
	case EventWaited:
		return "waited"
	case EventLeaseLapsed:
		return "lease_lapsed"
	case EventForeignRecord:
		return "foreign_record"
	case EventNotRun:
		return "not_run"
	case EventTenantIgnored:
		return "tenant_ignored"
	default:
		return "unknown"
	}
}

// Event is one thing the dispatcher did. It never holds the activity's
// arguments or its result.
type Event struct {
	Kind EventKind
	// Activity is the activity type name; ActivityKind its declared kind.
	Activity     string
	ActivityKind activity.Kind
	// Tenant and Key identify the record; Key is empty when none could be
	// derived.
	Tenant string
	Key    string
	// WorkflowID, RunID, ActivityID and Attempt name the execution.
	WorkflowID string
	RunID      string
	ActivityID string
	Attempt    int32
	// Reason is set on EventIndeterminate and on the probe events (the
	// reason the outcome would have been indeterminate).
	Reason activity.Reason
	// Err is the error behind EventStoreError, EventOrphaned,
	// EventReleased, EventIndeterminate, EventSuperseded,
	// EventProbeUnsettled, EventProbeLate, EventMisconfigured,
	// EventArgumentsMismatch and EventNotRun, if any.
	Err error
	// Duration is how long the store took to answer the claim
	// (EventClaimed), how long the execution waited in all before a
	// recorded outcome answered it (EventDeduplicated), or how long one wait
	// lasted (EventWaited; EventWaiting is reported when the wait starts,
	// with zero).
	Duration time.Duration
	// Decision is set on EventDecided.
	Decision *DecisionAudit
	// Final is set on the event that reports the execution's end state:
	// EventDeduplicated, EventCompleted, EventReleased, EventIndeterminate,
	// EventSuperseded, EventArgumentsMismatch, EventMisconfigured,
	// EventOrphaned or EventNotRun. Nothing of the execution is reported
	// after it but the background settlement of an orphaned claim
	// (EventCompleted or EventReleased, not Final). An execution cancelled
	// by its caller reports no final event; nor does one whose claim the
	// store refuses to free as no longer its own, or whose transaction's
	// commit the store could not be asked about (their last event is
	// EventStoreError).
	Final bool
}

// Observer receives the dispatcher's events. Observe is called on the
// activity's goroutines, possibly on several at once (the lease renewer
// reports its store errors from its own): it must be safe for concurrent
// use, quick, and must not block.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }
