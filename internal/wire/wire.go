// Package wire holds the names the library writes where another release
// reads them: the workflow.GetVersion change IDs a workflow records in its
// history, the headers a workflow's calls carry to the dispatcher, the
// encoding of a recorded definite failure, and the run component of a
// standalone activity's key. Every one is a compatibility promise (a
// release reads what each earlier one wrote), so none of their values ever
// changes; no user writes them, which is why they live here rather than in
// the interceptor package's surface.
package wire

import "strconv"

// RouterChangeID is the workflow.GetVersion change ID under which a
// workflow records, at its first activity call, whether its indeterminate
// outcomes wait for a person (version 1) or reach the workflow code
// (workflow.DefaultVersion, also the answer for histories recorded before
// the router existed). The recorded answer wins over the worker's current
// Options.AwaitDecision, so turning it on or off never changes what a
// running workflow does on replay: it applies to workflows that make their
// first activity call after the change.
const RouterChangeID = "idempotency.router"

// TenantChangeID is the workflow.GetVersion change ID under which a
// workflow records, at its start, that the tenant it runs under when
// neither the interceptor.TenantHeader header nor the interceptor.TenantMemo memo gives one was
// fixed by its history (version 1): the worker's Options.DefaultTenant in
// force then, possibly none, is recorded beside it (a side effect) and read back on every
// replay, so redeploying workers with another DefaultTenant applies to new
// workflows only. Histories recorded before (no marker:
// workflow.DefaultVersion) keep reading DefaultTenant from the worker that
// replays them, as they always did. Workflows whose tenant comes from the
// header or the memo record nothing: those are in the history already.
const TenantChangeID = "idempotency.tenant"

// RunScopeChangeID is the workflow.GetVersion change ID under which a
// workflow records, at its first activity call, that the keys of its calls
// are scoped by its original run ID (version 1): the run ID its start event
// was written under, which a reset keeps (workflow.Info.OriginalRunID). Each
// call it schedules then carries that ID in the [RunScopeHeader] header, and
// under interceptor.ScopeRun the dispatcher scopes the call's key by it, so a run made
// by `temporal workflow reset` finds the records of the run it was reset
// from instead of running their effects again. A run never reset has the
// same original and current run ID: its keys are what they were before.
// Continue-as-new and a workflow retry write a new start event, so their
// runs keep keys of their own.
//
// Histories recorded before (no marker: workflow.DefaultVersion) carry no
// header, and their calls stay scoped by the current run ID, so a running
// workflow's keys never move. A previous release replays the marker (the
// SDK skips version markers it does not ask for) and schedules calls
// without the header: for a run never reset, the keys it derives are the
// same.
const RunScopeChangeID = "idempotency.run-scope"

// FirstRunScopeChangeID is the workflow.GetVersion change ID under which a
// workflow of a worker with Options.Scope interceptor.ScopeFirstRun records, at its
// first activity call, that the keys of its calls are scoped by the first
// run of its chain (workflow.Info.FirstRunID, which a workflow retry, a
// continue-as-new and a reset keep): each call carries that run ID in the
// [RunScopeHeader] header. A workflow without the marker scopes as
// [RunScopeChangeID] says, whatever the option later is, and one with it
// keeps the first run's scope on every worker. The previous release
// replays the marker (the SDK skips version markers it does not ask for)
// and its activity workers scope a call by the header's run ID, as they
// do a reset run's; switch the option on once every workflow worker runs
// a release that has it (a workflow worker of the previous release writes
// its own run's scope into the calls it schedules).
const FirstRunScopeChangeID = "idempotency.first-run-scope"

// RunScopeHeader is the header in which a workflow's calls carry the run ID
// their keys are scoped by (see [RunScopeChangeID]), as a string.
const RunScopeHeader = "idempotency-run-scope"

// KeySecretChangeID is the workflow.GetVersion change ID under which a
// workflow records, at its first activity call, the generation of the
// secret its calls' keys are derived under (Options.KeySecret): the
// version is the generation itself (1 to keyspace.MaxSecretGeneration).
// Each call it schedules then carries the generation in the
// [KeySecretHeader] header, and the dispatcher derives the call's key and
// check under the secret of that generation (Options.KeySecret or one of
// Options.KeySecrets).
//
// A workflow that made its first call without a secret records nothing
// (workflow.DefaultVersion on replay) and its keys stay unkeyed for its
// life, whatever the configuration later says; one keyed under a
// generation stays under it, also on a worker whose KeySecret is another.
// Only a version marker is written, which every release replays (the SDK
// skips version markers the code does not ask for).
const KeySecretChangeID = "idempotency.key-secret"

// KeySecretHeader is the header in which a workflow's calls carry the
// generation of the secret their keys are derived under (see
// [KeySecretChangeID]), as an integer.
const KeySecretHeader = "idempotency-key-secret"

// SettleChangeID is the workflow.GetVersion change ID under which a routed
// workflow (see [RouterChangeID]) records that it settles by the rules of
// version 1 what the library can settle without a person:
//
//   - A call that ran nothing because the store did not answer
//     (activity.NotRun) is run again after a durable timer, backing off
//     (storeWaitFirst doubling to storeWaitCap, at most storeWaitMax
//     times), instead of failing the workflow; nobody is asked.
//   - A call whose attempts Temporal ended with a timeout that carries the
//     dispatcher's activity.TimeoutMarker is routed like an indeterminate
//     outcome (reason activity.ReasonTimedOut).
//   - While a call waits for a person on a key whose activity declares a
//     probe (activity.IndeterminateOutcome.Probe), the decision.ProbeActivityName
//     activity asks the probe again on a backoff schedule recorded with the
//     wait (the first ask at once when nobody asked the probe about the
//     outcome, each ask heartbeating and scheduled again when its worker
//     dies); the first of a definite probe answer and a person's decision
//     settles the key, fenced by the record's token, and the other is
//     rejected with the reason. A call the probe settled that, run
//     again, fails indeterminate again reaches the workflow with its error
//     instead of waiting once more (a downstream that always times out),
//     unless the workflow recorded [ProbeRerunChangeID].
//   - The wait for a person is a timer with a summary, so the Web UI's
//     default History view and the history show it, and the decision is
//     recorded by decision.ResolveActivityName with a start-to-close of seconds
//     (resolveTimeout), so a decision accepted as its worker dies is applied
//     within seconds.
//
// It is asked where the first of these begins (never at a workflow's
// start), so histories recorded before it replay as they ran.
const SettleChangeID = "idempotency.settle"

// ProbeRerunChangeID is the workflow.GetVersion change ID under which a
// routed workflow that settles (see [SettleChangeID]) records, where a call
// the probe's answer ran again first fails indeterminate again, that such
// a call waits once more (version 1; Options.WaitAfterProbeRerun) instead
// of reaching the workflow with its error. The probe's answer said what
// the earlier run did, or (settled) only that its record no longer asks
// for a decision — the holder gone, the record completed or newer — never
// what the run it caused did: that outcome is as unknown as any, and waits
// for the probe or a person like any. It reaches the workflow only when
// the probe answers, on that wait, that nothing landed (the error is then
// decision.ErrorTypeNotLanded: the call keeps failing, the key is free,
// and running it once more would go round without end on a downstream that
// fails every call), or after probeRerunMax such runs in a row. Histories
// without the marker hand the error on as they did. Releases before it
// cannot replay the wait that follows: the option stays off until every
// worker runs a release that has it.
const ProbeRerunChangeID = "idempotency.probe-rerun"

// ProbeOnScheduleChangeID is the workflow.GetVersion change ID under
// which a workflow records, where it first asks a probe again, that it
// asks on the whole schedule in one activity
// (decision.ProbeOnScheduleActivityName; Options.ProbeOnSchedule): a
// handful of history events per wait (the activity scheduled, started,
// completed or cancelled) instead of a timer and an activity per ask.
// Histories without the marker ask as they did; a history with it asks in
// one activity on every worker of this release, whatever its
// Options.ProbeOnSchedule. Releases before it replay neither the activity
// nor its absence: the option stays off until every worker runs a release
// that has it.
const ProbeOnScheduleChangeID = "idempotency.probe-schedule"

// DecisionChangeID is the workflow.GetVersion change ID under which a
// workflow records, when the first decision.SignalName reaches it, that it
// takes decision signals by the rules of version 1:
//
//   - A decision is accepted in the same step as it is checked, so the
//     first decision accepted on a key wins and every later one — another
//     signal, or an update, even one delivered in the same workflow task —
//     is rejected with the reason ("already decided"). Under
//     workflow.DefaultVersion a signal is checked on arrival and accepted
//     later, and two decisions delivered together are both applied.
//   - The signal must say who decided (Decision.By), as the update must.
//   - The part of the check that depends on the worker's declarations
//     (does the result decode into the activity's return type?) is
//     recorded in the history, so a worker deployed later with other
//     declarations replays the verdict as it was given.
//
// A change ID of its own, asked when a decision signal arrives, rather
// than a version 2 of RouterChangeID, which is recorded at the workflow's
// first call: the rules apply to every decision made after the deploy, also
// in workflows that were already waiting (unless they received a decision
// signal before it, whose replay has fixed the answer), and a worker of an
// earlier release, whose GetVersion of RouterChangeID allows at most 1,
// is not made to fail every routed workflow. Histories recorded before (no
// marker: workflow.DefaultVersion) take their signals as they were taken
// then, by the configuration of the worker replaying them.
const DecisionChangeID = "idempotency.decision"

// DecisionOrderChangeID is the workflow.GetVersion change ID under which a
// workflow records, when a decision.SignalName names a key no call of it
// waits on yet, that it takes the signal by the rules of version 1: the
// calls of the workflow get their turn first, so a call whose failure
// arrived in the same workflow task as the signal opens its wait, and the
// signal is then taken on it. Only a key still waited on by no call after
// that turn is rejected ("no call is waiting").
//
// Under workflow.DefaultVersion the signal is checked before the call has
// seen its failure: a person who signals while no workflow worker polls
// (decision.Send falls back to the signal when the server takes no Update)
// is told no call is waiting, and the workflow then waits for the decision
// it was sent. The version is asked only where the signal finds no wait,
// so histories recorded without the marker replay as they ran, the signal
// rejected.
const DecisionOrderChangeID = "idempotency.decision-order"

// FailureEncoding marks the payload of a recorded definite failure
// (activity.Policy.DefiniteErrors): a temporal.api.failure.v1.Failure in
// protobuf wire form, made by the failure converter over the recording
// data converter, so the failure's details go through its codecs. The
// payload itself goes through them too, as a recorded result does.
const FailureEncoding = "binary/x-idempotency-failure"

// standaloneRunPrefix begins every [StandaloneRun]. Its first byte, 0xFF,
// never occurs in valid UTF-8.
const standaloneRunPrefix = "\xffactivity:"

// StandaloneRun returns the run component of the key of a standalone
// activity (one started with client.ExecuteActivity, outside any workflow)
// with activityID in namespace:
//
//	"\xff" "activity:" decimal(len(namespace)) ":" namespace ":" activityID
//
// The activity ID is what the server admits a standalone activity by, so
// every attempt of it, and every later run of the same ID (which the
// server allows once a run has closed, under its ID reuse policy), derives
// the same key and finds the same record; another activity ID is another
// key, as another workflow run is. The namespace is part of it because an
// activity ID is unique within its namespace only.
//
// It never equals a workflow run ID or workflow ID, the run components of
// keys of activities that belong to a workflow (interceptor.ScopeRun, interceptor.ScopeWorkflow):
// Temporal carries those as protobuf strings, which are valid UTF-8, and
// 0xFF is not. The length prefix makes it unambiguous: no two pairs of
// namespace and activity ID share one. Like the key encoding it feeds, this
// form is a compatibility promise: changing it would leave records under
// the old form unmatched.
func StandaloneRun(namespace, activityID string) string {
	return standaloneRunPrefix + strconv.Itoa(len(namespace)) + ":" + namespace + ":" + activityID
}
