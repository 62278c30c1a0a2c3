// Package interceptor is the dispatcher: a Temporal worker interceptor that
// claims an idempotency key before a declared activity's body runs,
// answers duplicates with the recorded outcome, makes concurrent duplicates
// wait for the first caller, and stops the run with a typed error when an
// effect's outcome is one nobody can state.
//
// Most users install it through the worker package (worker.NewPlugin,
// worker.New) and set [Options]; docs/GUIDE.md shows the wiring.
//
// # The promise
//
// At most one side effect per key within the retention window. Not exactly
// once: a call that fails without answering leaves the effect unknown, and
// the dispatcher reports that rather than guessing. Not ever: a retry that
// arrives after the store's retention window (or the activity's own,
// activity.Policy.Retention) sees a free key. Not across
// tenants: records are tenant-scoped. (An indeterminate key is not subject
// to the window: it waits for a person however long that takes.)
//
// # What it does for one execution
//
//   - No declaration, or READ_ONLY: the body runs as if the interceptor were
//     not there.
//   - The key is derived from the tenant (see [TenantFunc]), the run (see
//     [Scope]), the activity type name and the declared key arguments. The
//     activity ID and attempt are never part of it.
//   - Claim. Completed: the recorded outcome is returned and the body is not
//     entered. Held by a live caller (another call, or an earlier attempt
//     whose body outlived its start-to-close): wait for its answer,
//     heartbeating. Held by a caller whose lease ran out: IDEMPOTENT takes
//     over, EFFECTFUL fails indeterminate (unless its probe answers).
//     Indeterminate: fail again. A record made with other values of the
//     checked arguments (activity.Policy.CheckArguments) is not an answer:
//     the call fails with the non-retryable
//     activity.ErrorTypeArgumentsMismatch error.
//   - Acquired: the body runs with the key in its context; the lease is
//     renewed every third of its length until the body returns, also past
//     the activity's deadline. If a renewal finds the key taken over, the
//     body's context is cancelled with [ErrSuperseded]. A result is recorded
//     and returned; a failure frees the key (IDEMPOTENT, or
//     activity.NoEffect) or marks it indeterminate (EFFECTFUL).
//   - A store that cannot be reached when the body has returned: the result
//     is still returned, the claim is reported orphaned ([EventOrphaned]),
//     and the write that settles it is retried in the background for
//     Options.OrphanRetry ([Interceptor.Stop] ends these retries).
//   - A probe before a person: when an EFFECTFUL outcome would be
//     indeterminate (the body failed, or a lost holder's key was taken over)
//     and the declaration names an activity.Probe, the dispatcher asks it
//     first, within the activity's remaining time. Landed: the probe's
//     result is recorded and returned. Did not land: the key is freed and
//     the call fails with the retryable [decision.ErrorTypeNotLanded] error.
//     Cannot tell, an error, a wrong type, or no answer in time
//     ([EventProbeLate]): indeterminate, with the reason in its Cause. The
//     writes that settle what the probe said get Options.StoreTimeout of
//     their own, so a slow probe never reads as a store outage.
//   - No key, or a tenant no store accepts: the body is never entered. A
//     store that cannot be reached is retried for Options.ClaimRetry (never
//     past the activity's deadline); a store that stays down never reads as
//     permission.
//
// # Sizing the lease, the start-to-close timeout and heartbeats
//
// The lease (Options.Lease, 10 s by default) is how long a claim outlives
// its worker: a killed worker's key is found lost within one lease. Its
// renewals cost one store write every Lease/3 per running body.
//
//   - StartToCloseTimeout: longer than the body's usual run. A body that
//     outlives it keeps its claim, and the retry waits for it rather than
//     running it again: a too-short timeout costs time, never a second effect.
//   - Lease: longer than the worst pause of a live worker (GC, a stalled
//     host, the store's failover), shorter than you will wait to learn a
//     worker died.
//   - HeartbeatTimeout: if set, longer than Options.WaitHeartbeat (a waiting
//     duplicate heartbeats that often). A long body should heartbeat itself.
//   - A body should honour its context: it ends at the start-to-close
//     timeout, when the activity is cancelled, and when its claim is
//     superseded ([ErrSuperseded]).
//
// # Payload codecs
//
// What a declared activity returns to Temporal — the body's result, or a
// duplicate's answer from the store — is encoded by the worker's own data
// converter and codecs, as an undeclared activity's result is.
//
// What the store keeps is encoded with Options.DataConverter. Left nil, the
// dispatcher uses the converter of the client the worker runs on when the
// client carries the worker package's plugin (it hands the converter over
// in the activity's context), else the SDK's default converter, which keeps
// results in the store in the clear. Changing the converter leaves earlier
// records readable only if its codecs still decode them; a record that
// cannot be decoded fails the call with [decision.ErrorTypeOutcomeUnreadable].
//
// # Waiting for a person
//
// By default a workflow receives the non-retryable indeterminate error and
// decides itself. With Options.AwaitDecision the call waits instead, and a
// person decides with nothing but the temporal CLI (docs/DECIDING.md):
//
//	temporal workflow list --query 'IdempotencyPendingKeys IS NOT NULL'
//	temporal workflow query --workflow-id W --name idempotency.pending
//	temporal workflow update execute --workflow-id W --name idempotency.decide \
//	    --input '{"key":"v1:…","action":"complete","result":"seat 14C","by":"ops@acme","reason":"airline confirmed","reference":"PNR 5XK2"}'
//
// What each part does:
//
//   - [decision.QueryName] answers with the keys the workflow waits on
//     ([decision.PendingDecision]) and the decision signals it rejected.
//   - [decision.UpdateName] takes a [decision.Decision]: complete (with the
//     activity's result as JSON), free, retry or fail, and who decided (By,
//     required). Its validator rejects, writing nothing, a key nobody waits on
//     or already decided, an unknown action or field, a result that does not
//     decode into the activity's return type, another tenant. An accepted
//     decision is recorded through the [decision.ResolveActivityName]
//     activity, with By, Reason and Reference kept with the record.
//     [decision.SignalName] takes the same decision for clients without Update.
//   - The first decision accepted on a key wins; a second is rejected with
//     the reason.
//   - The wait shows as a timer with a summary, in the workflow's current
//     details, and with Options.PendingSearchAttribute in a KeywordList
//     search attribute (create it first; a worker built by the worker
//     package refuses to start without it, and [Interceptor.CheckSearchAttribute]
//     asks otherwise).
//   - Routing goes by the error itself, so split workflow workers route too.
//     Cancelling a waiting workflow leaves the record indeterminate for
//     idempotencyctl resolve.
//
// # What is settled without a person
//
// docs/SETTLING.md has each case: a call that ran nothing because the store
// did not answer fails with the retryable
// decision.ErrorTypeStoreUnavailable ([activity.NotRun]) and a routed
// workflow runs it again after a timer; a call Temporal timed out carries its
// key in an [activity.TimeoutMarker], so [activity.AsIndeterminate] reads it
// as reason timed_out; while a call waits for a person, a declared probe is
// asked again on a backoff schedule (decision.ProbeActivityName,
// [Interceptor.ProbeActivity]; in one activity with Options.ProbeOnSchedule).
//
// # Replay safety
//
// What a workflow decides from the worker's configuration is fixed by its
// history, under workflow.GetVersion change IDs: whether it is routed
// (AwaitDecision), its default tenant, the DecisionTimeout and search
// attribute when a wait begins, a decision signal's verdict, its key scope,
// its key secret's generation, how it probes. So turning an option on or off
// applies to workflows that start (or make their first call) afterwards, and
// running ones replay as they ran. docs/COMPATIBILITY.md lists each change ID
// and what the previous release does with it. A routed workflow applies
// decisions through the [decision.ResolveActivityName] activity on its own
// task queue: keep it registered there (the worker package does) until the
// workflows routed before turning AwaitDecision off have finished.
//
// # Tenants
//
// [TenantPropagator] carries the tenant from the starter's context
// ([WithTenant]) to the workflow and its activities; [TenantFunc] resolves it
// for each execution (by default from that header, [TenantFromHeader]; one
// namespace per tenant takes [TenantFromNamespace]).
//
// A workflow started by the temporal CLI, the Web UI, a schedule or another
// SDK carries no tenant header. It runs under the tenant in its [TenantMemo]
// memo, a string (temporal workflow start --memo 'idempotency-tenant="acme"'),
// else under Options.DefaultTenant as recorded at its start, so redeploying
// with another default applies to new workflows only. With none, every
// declared call fails at once with the non-retryable
// [decision.ErrorTypeNoTenant] error, which names the ways to give one, and
// nobody is asked (there is no key, and nothing ran). Nexus handlers resolve
// their tenant with Options.NexusTenant ([NexusOperation]).
//
// # Standalone activities
//
// An activity started on its own with client.ExecuteActivity goes through
// the dispatcher like any other. Its key is scoped by its namespace and
// activity ID, whatever [Scope] says, so every attempt and a later run of the
// same ID find one record. Its tenant comes from WithTenant on the starting
// context, else Options.DefaultTenant. No workflow can wait for a person: an
// indeterminate outcome reaches the caller of ActivityHandle.Get as the typed
// error, and idempotencyctl resolve settles the record.
//
// # Observing and testing
//
// Every step is an [Event] handed to the [Observer], and a counter or timer
// on the activity's Temporal metrics handler (docs/METRICS.md). Events never
// carry arguments or results. The module
// github.com/tesserix/idempotency/contrib/oteltrace adds them to the
// activity's OpenTelemetry span. Package
// github.com/tesserix/idempotency/idempotencytest runs a workflow through
// this interceptor in the SDK's test environment and makes a declared
// activity end with each outcome.
package interceptor
