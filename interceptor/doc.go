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
//     entered ([EventDeduplicated]). Held by a live caller — another call,
//     or an earlier attempt of this same activity whose body outlived its
//     start-to-close — : wait for its answer, heartbeating; a recorded result
//     is returned as a duplicate's. Held by a caller that is gone (its lease
//     ran out): IDEMPOTENT takes over, EFFECTFUL fails indeterminate
//     (unless its probe answers; see below).
//     Indeterminate: fail again. On each of these paths a record made with
//     other values of the declaration's checked arguments
//     (activity.Policy.CheckArguments) is not an answer: the call fails
//     with the non-retryable activity.ErrorTypeArgumentsMismatch error
//     ([EventArgumentsMismatch]) and the record is left as it is.
//   - Acquired: the body runs with the key in its context; the lease is
//     renewed every third of its length until the body returns, also past
//     the activity's deadline. If a renewal finds the key taken over, the
//     body's context is cancelled with [ErrSuperseded]. A result is recorded
//     (see Payload codecs) and returned to the SDK as the body returned
//     it; a failure frees the key (READ_ONLY,
//     IDEMPOTENT, or activity.NoEffect) or marks it indeterminate
//     (EFFECTFUL).
//   - A store that cannot be reached when the body has returned: the result
//     is still returned (Temporal keeps it in the workflow's history), the
//     claim is reported orphaned ([EventOrphaned]), and the write that
//     settles it — the outcome, the indeterminate mark, freeing the key —
//     is retried in the background for Options.OrphanRetry, so the record
//     does not stay pending with nobody to settle it. [Interceptor.Stop]
//     ends these retries.
//   - A probe before a person: when an EFFECTFUL outcome would be
//     indeterminate (the body failed, or the key was taken over from a lost
//     holder) and the declaration names an activity.Probe, the dispatcher
//     asks it first, keeping the claim's lease renewed, within the
//     activity's remaining time less a margin to report. Landed: the
//     probe's result (a value of the activity's return type) is recorded
//     and returned as a duplicate's answer ([EventProbeLanded], then
//     [EventCompleted]). Did not land: the key is freed and the call fails
//     with the retryable [decision.ErrorTypeNotLanded] error, so the retry policy
//     runs the activity again ([EventProbeNotLanded], then
//     [EventReleased]). Cannot tell, an error, a panic, a result of the
//     wrong type: indeterminate as without a probe ([EventProbeUnsettled],
//     then [EventIndeterminate]); no answer in time: the same, reported as
//     [EventProbeLate]. The store writes that settle what the probe said get
//     Options.StoreTimeout of their own, counted from its answer, so a slow
//     probe never reads as a store outage. A claim taken over while the
//     probe runs writes nothing. An outcome the probe left
//     unsettled says why in its Cause ("probe: cannot tell", or the probe's
//     error), which is what a person deciding it reads. The probe is never
//     asked where
//     there is no claim to settle: no key, a store that is down, a body
//     superseded while it ran, a record already indeterminate.
//   - No key, or a tenant no store accepts: the body is never entered. A
//     store that cannot be reached is retried for Options.ClaimRetry (never
//     past the activity's deadline); a store that stays down does not read
//     as permission.
//
// # Sizing the lease, the start-to-close timeout and heartbeats
//
// The lease (Options.Lease, 10 s by default) is how long a claim outlives
// its worker: a killed worker's key is found lost, and taken over or marked
// indeterminate, within one lease. Its renewals cost one store write every
// Lease/3 per running body. Size them together:
//
//   - StartToCloseTimeout: longer than the body's usual run. A body that
//     outlives it keeps its claim (renewals go on until it returns), and the
//     retry waits for it rather than running it again, so a too-short
//     timeout costs time, never a second effect.
//   - Lease: longer than the worst pause of a worker that is alive (GC, a
//     stalled host, the store's failover), shorter than you are willing to
//     wait to learn a worker died. 10 s suits most; raise it where a store
//     fails over slowly.
//   - HeartbeatTimeout: if set, longer than Options.WaitHeartbeat (a waiting
//     duplicate heartbeats every WaitHeartbeat, or every half heartbeat
//     timeout if that is shorter). A body that runs long should heartbeat
//     itself, as any Temporal activity should.
//   - A body should honour its context: it ends when the start-to-close
//     timeout passes, when the activity is cancelled, and when its claim is
//     superseded ([ErrSuperseded]).
//
// # Payload codecs
//
// What a declared activity returns to Temporal — the body's result, or a
// duplicate's answer from the store — is encoded by the worker's own data
// converter and codecs, exactly like an undeclared activity's result: the
// dispatcher hands the SDK the body's value as it is, and a recorded
// outcome as a raw payload with the store's codecs undone, which the SDK
// then encodes. An encrypting codec on the client therefore covers declared
// activities' results in the workflow history with nothing set here.
//
// What the store keeps is encoded with Options.DataConverter. Left nil, the
// dispatcher uses the converter of the client the worker runs on when the
// client carries the worker package's plugin (worker.NewPlugin, or its
// client part, which worker.Dial and worker.ClientOptions add: it hands the
// converter over in the activity's context), else the SDK's default
// converter, which keeps results in the store in the clear: on another
// client, set Options.DataConverter to the client's converter when payloads
// must be encrypted at rest. A context-aware converter
// (converter.ContextAware) gets the activity's context. The store's
// converter should make the same payloads as the client's apart from codecs
// (a duplicate's answer keeps the store converter's payload encoding, under
// the client's codecs), and changing it leaves earlier records readable only
// if its codecs still decode them; a record that cannot be decoded fails the
// call with [decision.ErrorTypeOutcomeUnreadable].
//
// # Waiting for a person
//
// By default a workflow receives the non-retryable indeterminate error and
// decides itself. With Options.AwaitDecision the call waits instead, and a
// person decides with nothing but the temporal CLI:
//
//	temporal workflow list --query 'IdempotencyPendingKeys IS NOT NULL'
//	temporal workflow query --workflow-id W --name idempotency.pending
//	temporal workflow update execute --workflow-id W --name idempotency.decide \
//	    --input '{"key":"v1:…","action":"complete","result":"seat 14C","by":"ops@acme","reason":"airline confirmed","reference":"PNR 5XK2"}'
//
// What each part does:
//
//   - [decision.QueryName] answers from the workflow's start with the keys it waits
//     on ([decision.PendingDecision]: activity, tenant, key, reason, whether the effect
//     may have landed), then the decision signals it rejected lately.
//   - [decision.UpdateName] takes a [decision.Decision]: complete (with the activity's
//     result as JSON), free, retry or fail, and who decided (By, required).
//     Its validator rejects, with the reason and nothing written to the
//     history, a key nobody waits on or already decided, an unknown action,
//     a misspelt field, complete without a result, a result that does not
//     decode into the activity's declared return type (when the workflow
//     worker holds the declaration), a tenant that is not the record's, or
//     a decision that names no one. An accepted update records the
//     decision once per key through the [decision.ResolveActivityName] activity and
//     returns a [decision.Result] saying what it did. [decision.SignalName] takes
//     the same decision for clients without Update, with the same checks; a
//     rejected signal changes nothing, is logged, and is listed by the query.
//   - The first decision accepted on a key wins. A decision is accepted in
//     the step that checks it, so of two delivered in one workflow task
//     (two signals sent while no worker polled, or a signal and an update)
//     the second finds the key decided and is rejected with the reason.
//   - While it waits, the wait is a timer whose summary names the activity,
//     the key and the reason (the Web UI's History view, temporal workflow
//     show --detailed), the workflow's current details (temporal workflow metadata,
//     the Web UI's "User Metadata"; not temporal workflow describe) say so,
//     and, with
//     Options.PendingSearchAttribute, a KeywordList search attribute holds
//     the keys it waits on. Create it first (temporal operator
//     search-attribute create --name IdempotencyPendingKeys --type
//     KeywordList). A worker built with worker.New refuses to start where
//     the namespace lacks it; with the interceptor or the plugin installed
//     otherwise, call [Interceptor.CheckSearchAttribute] before the worker
//     starts: where the namespace lacks it, that returns one error to log
//     and the attribute is left alone.
//   - Routing goes by the error itself, for activities and local activities,
//     so a workflow worker that does not host the activities (split workers)
//     routes too. Cancelling a waiting workflow ends it cancelled; the record
//     stays indeterminate for a later decision (idempotencyctl resolve).
//   - A complete decision on a record that is gone (its retention ended)
//     records the person's result instead of freeing the key.
//
// The result is recorded by the Resolve activity with the converter the
// dispatcher records with. While it routes, the workflow hands each call the
// activity's payloads as they arrived, so the caller's Get decodes them
// once, as a strict codec requires.
//
// The decision's By, Reason and Reference are logged by the workflow and by
// the Resolve activity and reported as [EventDecided]; they are not yet kept
// with the record.
//
// # What is settled without a person
//
// Under [wire.SettleChangeID] (docs/SETTLING.md has the whole story):
//
//   - A call that ran nothing because the store did not answer fails with
//     the retryable decision.ErrorTypeStoreUnavailable error
//     ([activity.NotRun]); a routed workflow runs it again after a durable
//     timer, backing off, and nobody is asked.
//   - A call whose attempts Temporal ended with a timeout carries its key in
//     the last heartbeat's details (an [activity.TimeoutMarker] the
//     dispatcher appends to every heartbeat of an EFFECTFUL execution and
//     hides from the body), so [activity.AsIndeterminate] reads it as
//     reason timed_out and a routed workflow waits on it.
//   - While a call waits for a person on a key whose activity declares a
//     probe, the decision.ProbeActivityName activity
//     ([Interceptor.ProbeActivity]) asks it again on a backoff schedule;
//     the first definite answer or person's decision wins, fenced by the
//     record's token, and the other is rejected with the reason.
//   - The Resolve activity runs with a start-to-close of seconds, so a
//     decision accepted as its worker dies is applied within seconds.
//
// # Replay safety
//
// What a workflow decides from the worker's configuration is fixed by its
// history. Its tenant, when neither the header nor the memo gives one, is
// the Options.DefaultTenant recorded at its start under [wire.TenantChangeID]
// (histories recorded before keep reading it from the replaying worker; a
// call they run again after a decision runs under the tenant of the record
// decided on, so a changed default cannot move its key). A workflow records
// at its first activity call, with workflow.GetVersion
// under [wire.RouterChangeID], whether it is routed; histories without the marker
// (recorded with AwaitDecision off, or before this version) are never
// routed. So turning AwaitDecision on or off applies to workflows that make
// their first activity call afterwards, and running ones replay as they ran.
// The DecisionTimeout and search attribute in force when a wait begins are
// recorded too (a side effect), so changing them never breaks replay.
// Decisions replay from the history alone: the update's handler reads only
// the wait and the decision (the validator, which also reads the worker's
// declarations, is not run on replay), and a decision signal's verdict on
// its result is recorded under [wire.DecisionChangeID], so a workflow worker
// deployed later with or without the declarations replays what was
// accepted. Signals of histories recorded before [wire.DecisionChangeID] are
// checked as they were then, against the declarations of the worker
// replaying them: deploy declarations to a split workflow worker only once
// the workflows that received decision signals before this release have
// finished. A decision signal that names a key no call waits on yet is
// taken after the workflow's calls have had their turn
// ([wire.DecisionOrderChangeID]), so one delivered in the same workflow task as
// the failure it decides (sent while no workflow worker polled) is taken
// once that call's wait is open; histories recorded before reject it, as
// they did. What
// remains a workflow code change: handling the indeterminate error in the
// workflow itself (a workflow that is routed never sees it, unless the
// decision is fail or the timeout passes), and histories of workflows that
// waited under the pre-release router, which recorded no marker and replay
// as not routed. A routed workflow applies decisions through the
// [decision.ResolveActivityName] activity on its own task queue, so keep it
// registered there (the worker package's plugin and worker.New do) until
// the workflows routed before turning AwaitDecision off have finished.
//
// # Tenants
//
// [TenantPropagator] carries the tenant from the workflow starter's context
// ([WithTenant]) to the workflow and its activities; [TenantFunc] resolves it
// for each execution (by default from that header, [TenantFromHeader]; one
// namespace per tenant takes [TenantFromNamespace]).
//
// A workflow started by the temporal CLI, the Web UI, a schedule or another
// SDK carries no tenant header. It runs under the tenant in its [TenantMemo]
// memo, a string (temporal workflow start --memo 'idempotency-tenant="acme"':
// the CLI reads each --memo value as JSON), else under Options.DefaultTenant
// as its history fixed it ([wire.TenantChangeID]): the default in force when the
// workflow started is recorded then and read back on every replay, so
// redeploying workers with another default applies to new workflows only,
// and a workflow that started with none keeps none. With no tenant (no
// header, no memo, no default, or a memo that holds no tenant: a memo
// wins over the default, so a malformed one gives none), every declared
// call in it fails at once with the non-retryable [decision.ErrorTypeNoTenant]
// error, which names the three ways to give one and says when the memo held
// none; it is reported as [EventMisconfigured], and AwaitDecision or not,
// nobody is asked to decide (there is no key, and nothing ran).
//
// # Standalone activities
//
// An activity started on its own with client.ExecuteActivity
// (client.StartActivityOptions, no workflow) goes through the dispatcher
// like any other:
//
//   - Its key is scoped by its namespace and activity ID ([wire.StandaloneRun]),
//     whatever [Scope] says: the activity ID is what the server admits a
//     standalone activity by, so every attempt of it, and a later run of the
//     same ID (which the server allows once a run has closed, under the
//     start's ActivityIDReusePolicy), finds the same record, and a body that
//     ran once is not run again by it. Another activity ID is another key.
//     The run component never equals a workflow's run ID or workflow ID, so
//     a standalone key never meets a workflow's.
//   - Its tenant travels as a workflow's does: interceptor.WithTenant on the
//     context given to ExecuteActivity, on a client with [TenantPropagator]
//     (the SDK applies a client's propagators to the start). Without it,
//     the tenant is Options.DefaultTenant; with neither, the call fails at
//     once with the non-retryable [decision.ErrorTypeNoTenant] error, no body
//     entered.
//   - No workflow can wait for a person: Options.AwaitDecision does not
//     apply, and an indeterminate outcome fails the activity with the
//     non-retryable typed error, which the caller of ActivityHandle.Get
//     receives (activity.AsIndeterminate reads it). The record's Origin
//     names the activity ID and no workflow, and its holder the activity's
//     run; idempotencyctl list and show find it, decide says that no
//     workflow waits on it, and resolve settles it. The same activity ID
//     started again after that answers from the resolution.
//
// # Observing
//
// Every step is an [Event] handed to the [Observer], and a counter or timer
// (see the Metric constants) on the activity's Temporal metrics handler.
// Events never carry arguments or results. The module
// github.com/tesserix/idempotency/contrib/oteltrace is an Observer that
// adds them to the activity's OpenTelemetry span (the key's digest, the
// outcome, how long a call waited), kept out of this module's
// dependencies.
//
// # Testing workflows
//
// Package github.com/tesserix/idempotency/idempotencytest runs a workflow
// through this interceptor in the SDK's test environment with a memory
// store, and makes a declared activity end with each outcome (answered
// from a record, indeterminate for each reason, settled by a probe), sends
// a person's decisions and lists the effects applied.
package interceptor
