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
//     entered ([EventDeduplicated]). Held by a live caller — another call,
//     or an earlier attempt of this same activity whose body outlived its
//     start-to-close — : wait for its answer, heartbeating; a recorded result
//     is returned as a duplicate's. Held by a caller that is gone (its lease
//     ran out): IDEMPOTENT takes over, EFFECTFUL fails indeterminate.
//     Indeterminate: fail again.
//   - Acquired: the body runs with the key in its context; the lease is
//     renewed every third of its length until the body returns, also past
//     the activity's deadline. If a renewal finds the key taken over, the
//     body's context is cancelled with [ErrSuperseded]. A result is recorded
//     (see Payload codecs) and returned to the SDK as the body returned
//     it; a failure frees the key (READ_ONLY,
//     IDEMPOTENT, or activity.NoEffect) or marks it indeterminate
//     (EFFECTFUL).
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
// client was built with worker.Dial or worker.ClientOptions (they hand it
// over through [WithDataConverter]), else the SDK's default converter,
// which keeps results in the store in the clear: on such a client, set
// Options.DataConverter to the client's converter when payloads must be
// encrypted at rest. A context-aware converter (converter.ContextAware) gets
// the activity's context. The store's converter should make the same
// payloads as the client's apart from codecs (a duplicate's answer keeps the
// store converter's payload encoding, under the client's codecs), and
// changing it leaves earlier records readable only if its codecs still
// decode them; a record that cannot be decoded fails the call with
// ErrorTypeOutcomeUnreadable.
//
// # Waiting for a person
//
// By default a workflow receives the non-retryable indeterminate error and
// decides itself. With Options.AwaitDecision the call waits instead: the
// workflow answers [PendingQuery] with its [PendingDecision] values, and a
// [Decision] sent on [DecisionSignal] settles each one — record the result
// against the key, free the key, retry after a settlement made elsewhere, or
// fail. The decision is recorded by the [ResolveActivityName] activity
// ([ResolveActivity]), with the converter the dispatcher records with;
// [EncodeOutcome] records one from outside a workflow. While it routes, the
// workflow hands each call the activity's payloads as they arrived, so the
// caller's Get decodes them once, as a strict codec requires.
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
