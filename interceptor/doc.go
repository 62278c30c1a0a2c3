// Package interceptor is the dispatcher: a Temporal worker interceptor that
// claims an idempotency key before a declared activity's body runs,
// answers duplicates with the recorded outcome, makes concurrent duplicates
// wait for the first caller, and stops the run with a typed error when an
// effect's outcome is one nobody can state.
//
// # The promise
//
// At most one side effect per key within the retention window. Not exactly
// once: a call that fails without answering leaves the effect unknown, and
// the dispatcher reports that rather than guessing. Not ever: a retry that
// arrives after the store's retention window sees a free key. Not across
// tenants: records are tenant-scoped.
//
// # What it does for one execution
//
//   - No declaration, or READ_ONLY: the body runs as if the interceptor were
//     not there.
//   - The key is derived from the tenant (see [TenantFunc]), the run (see
//     [Scope]), the activity type name and the declared key arguments. The
//     activity ID and attempt are never part of it.
//   - Claim. Completed: the recorded outcome is returned and the body is not
//     entered ([EventDeduplicated]). Held by another caller: wait for its
//     answer, heartbeating. Held by a caller that is gone (its lease ran
//     out, or it is an earlier attempt of the same activity): IDEMPOTENT
//     takes over, EFFECTFUL fails indeterminate. Indeterminate: fail again.
//   - Acquired: the body runs with the key in its context; the lease is
//     renewed while it runs. A result is recorded through the data
//     converter; a failure frees the key (READ_ONLY, IDEMPOTENT, or
//     activity.NoEffect) or marks it indeterminate (EFFECTFUL).
//   - No key, or no store: the body is never entered. A store that is down
//     does not read as permission.
//
// # Waiting for a person
//
// By default a workflow receives the non-retryable indeterminate error and
// decides itself. With Options.AwaitDecision the call waits instead: the
// workflow answers [PendingQuery] with its [PendingDecision] values, and a
// [Decision] sent on [DecisionSignal] settles each one — record the result
// against the key, free the key, retry after a settlement made elsewhere, or
// fail. The decision is recorded by the [ResolveActivityName] activity
// ([ResolveActivity]); [EncodeOutcome] records one from outside a workflow.
//
// # Observing
//
// Every step is an [Event] handed to the [Observer], and a counter or timer
// (see the Metric constants) on the activity's Temporal metrics handler.
// Events never carry arguments or results.
//
// # Tenants
//
// [TenantPropagator] carries the tenant from the workflow starter's context
// ([WithTenant]) to the workflow and its activities.
package interceptor
