package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
)

// historiesDir holds workflow histories recorded against the in-process
// server by the TestRecord… tests, committed so that every later version
// of the router must replay them.
const historiesDir = "testdata/histories"

// recordEnv names the environment variable that makes the TestRecord…
// tests (re)write the histories; its value prefixes their file names, one
// prefix per generation of the workflow-side code that recorded them:
//
//	old-   the pre-release router, before RouterChangeID
//	new-   RouterChangeID; the tenant read from the replaying worker's
//	       DefaultTenant, decision signals accepted late
//	gen3-  the tenant fixed by the history (TenantChangeID), decisions
//	       accepted in the step that checks them (DecisionChangeID)
//	gen4-  what the library settles without a person (SettleChangeID):
//	       the wait for the store, the probe asked again, Temporal's
//	       timeouts routed, the wait as a timer with a summary
//	gen5-  a decision signal delivered in the workflow task of the failure
//	       it decides taken once the call's wait is open
//	       (DecisionOrderChangeID)
//	gen6-  the probe's schedule recorded with its heartbeat timeout, its
//	       attempts, and whether the first ask is sent at once (a wait
//	       on an outcome nobody asked the probe about: timed_out,
//	       recorded)
//	gen7-  keys scoped by the run a reset keeps (RunScopeChangeID): a
//	       version marker at the first activity call
//	gen8-  keys derived under a secret (KeySecretChangeID): a version
//	       marker whose version is the secret's generation
//	gen9-  the probe asked on its schedule in one activity
//	       (ProbeOnScheduleChangeID)
//	gen10- keys scoped by the first run of the chain
//	       (FirstRunScopeChangeID, "gen10-first-run-"): a version marker
//	       at the first activity call
//
// A generation's histories are never re-recorded by a later one: they are
// what the later code must replay.
const recordEnv = "IDEMPOTENCY_RECORD_HISTORIES"

// unreplayable lists histories the current router cannot replay, and why:
// by file name (under every configuration), or "file/configuration".
var unreplayable = map[string]string{
	"old-on-signal-free.json": "recorded by the pre-release router (before RouterChangeID), which waited without " +
		"recording that it did; such a run is told apart from one that was not routed by nothing in its history",
}

// signalCheckedByReplayer explains why a history whose decision signal was
// accepted by a workflow worker without declarations, recorded before
// DecisionChangeID, cannot replay under a worker that declares the
// activity: the router of then recorded no verdict, so the signal is
// checked again against the replaying worker's declarations, which refuse
// the result it accepted. Histories recorded since carry the verdict.
const signalCheckedByReplayer = "recorded before DecisionChangeID: its decision signal is checked against the " +
	"declarations of the worker replaying it, and this one declares a result type the accepted result does not fit"

func init() {
	for _, cfg := range replayConfigs {
		if cfg.declare {
			unreplayable["new-on-split-signal-extra-field.json/"+cfg.name] = signalCheckedByReplayer
		}
	}
}

// replayConfigs are the worker configurations every history must replay
// under: the router off and on; DecisionTimeout removed, shortened and
// lengthened; a DefaultTenant other than the one the histories were
// recorded under (acme); a KeySecret, the one the gen8- histories were
// keyed under and a later generation; keys scoped by the first run; and
// the activities declared on the
// workflow worker (declare), which the workers that recorded them did not
// always.
var replayConfigs = []struct {
	name    string
	opts    interceptor.Options
	declare bool
}{
	{"off", interceptor.Options{}, false},
	{"on", interceptor.Options{AwaitDecision: true}, false},
	{"on-timeout-1s", interceptor.Options{AwaitDecision: true, DecisionTimeout: time.Second}, false},
	{"on-timeout-1h", interceptor.Options{AwaitDecision: true, DecisionTimeout: time.Hour}, false},
	{"off-declared", interceptor.Options{}, true},
	{"on-declared", interceptor.Options{AwaitDecision: true}, true},
	{"on-default-acme", interceptor.Options{AwaitDecision: true, DefaultTenant: "acme"}, false},
	{"on-default-acme-eu", interceptor.Options{AwaitDecision: true, DefaultTenant: "acme-eu"}, false},
	{"off-default-acme-eu-declared", interceptor.Options{DefaultTenant: "acme-eu"}, true},
	{"on-default-acme-eu-declared", interceptor.Options{AwaitDecision: true, DefaultTenant: "acme-eu"}, true},
	{"on-keyed-1", interceptor.Options{AwaitDecision: true, KeySecret: replaySecret}, false},
	{"off-keyed-2-declared", interceptor.Options{KeySecret: replaySecret2}, true},
	{"on-probe-schedule", interceptor.Options{AwaitDecision: true, ProbeOnSchedule: true}, false},
	{"on-first-run-declared", interceptor.Options{AwaitDecision: true, Scope: interceptor.ScopeFirstRun}, true},
}

// replayDeclarations are the declarations of the activities the recorded
// workflows call, as a workflow worker that declares them holds them.
func replayDeclarations() []*activity.Declaration {
	a, r := &airline{}, &reserver{}
	return []*activity.Declaration{
		activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}}),
		activity.MustDeclare(r.Reserve, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}}),
	}
}

// registerRecordedWorkflows registers on r every workflow the committed
// histories ran.
func registerRecordedWorkflows(r sdkworker.WorkflowReplayer) {
	r.RegisterWorkflow(OneBooking)
	r.RegisterWorkflow(BookLocally)
	r.RegisterWorkflow(BookOrGiveUp)
	r.RegisterWorkflow(TenantTaggedBooking)
	r.RegisterWorkflow(ReserveOn)
	r.RegisterWorkflow(BookAttempts)
	r.RegisterWorkflow(BookOn)
}

// unreplayableUnder says why the history in file cannot replay under the
// configuration named config, if it cannot (see unreplayable).
func unreplayableUnder(file, config string) (string, bool) {
	if why, ok := unreplayable[filepath.Base(file)]; ok {
		return why, true
	}
	why, ok := unreplayable[filepath.Base(file)+"/"+config]
	return why, ok
}

func TestReplayHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no committed histories under %s", historiesDir)
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	for _, file := range files {
		for _, cfg := range replayConfigs {
			t.Run(filepath.Base(file)+"/"+cfg.name, func(t *testing.T) {
				opts := cfg.opts
				opts.Store = st
				ic, err := interceptor.New(opts)
				require.NoError(t, err)
				if cfg.declare {
					require.NoError(t, ic.Declare(replayDeclarations()...))
				}
				r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
					Interceptors:       []sdkinterceptor.WorkerInterceptor{ic},
					ContextPropagators: []workflow.ContextPropagator{interceptor.TenantPropagator()},
				})
				require.NoError(t, err)
				registerRecordedWorkflows(r)
				err = r.ReplayWorkflowHistoryFromJSONFile(nil, file)
				if why, ok := unreplayableUnder(file, cfg.name); ok {
					require.Error(t, err, "listed as unreplayable, yet it replays: take it off the list")
					t.Skip(why)
				}
				require.NoError(t, err)
			})
		}
	}
}

// historyScenario is one recorded run of OneBooking: the router's options
// on the worker, and what the person does once the workflow waits (nil:
// nothing, the run is not expected to wait).
type historyScenario struct {
	name     string
	opts     interceptor.Options
	failures int
	// lostAnswers makes the first calls book and then fail.
	lostAnswers int
	decide      func(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, o activity.IndeterminateOutcome)
	// workflow and args default to OneBooking("BA117", 10s, 100ms).
	workflow any
	args     []any
	// noTenant starts the workflow without the tenant header (as the
	// temporal CLI does), with memo as its memo; else under tenant acme.
	noTenant bool
	memo     map[string]any
}

// recordScenarios runs each scenario against the in-process server and
// writes its history under historiesDir, when recordEnv is set.
func recordScenarios(t *testing.T, scenarios []historyScenario) {
	prefix, ok := os.LookupEnv(recordEnv)
	if !ok {
		t.Skip("set " + recordEnv + "=new- to record the histories again")
	}
	require.NoError(t, os.MkdirAll(historiesDir, 0o755))
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			st, err := store.NewMemory(store.MemoryOptions{})
			require.NoError(t, err)
			opts := sc.opts
			opts.Lease = 2 * time.Second
			e := newEnv(t, st, opts)
			a := &airline{failures: sc.failures, lostAnswers: sc.lostAnswers, ledger: e.ledger}
			require.NoError(t, e.worker.Register(activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
			e.worker.RegisterWorkflow(OneBooking)
			e.worker.RegisterWorkflow(BookLocally)
			e.worker.RegisterWorkflow(TenantTaggedBooking)
			e.start()
			ctx := context.Background()
			if !sc.noTenant {
				ctx = interceptor.WithTenant(ctx, "acme")
			}
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			wf, args := sc.workflow, sc.args
			if wf == nil {
				wf, args = OneBooking, []any{"BA117", 10 * time.Second, 100 * time.Millisecond}
			}
			run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: testenv.UniqueName("wf"), TaskQueue: e.queue, Memo: sc.memo,
			}, wf, args...)
			require.NoError(t, err)
			if sc.decide != nil {
				var pending []decision.PendingDecision
				require.Eventually(t, func() bool {
					v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
					return err == nil && v.Get(&pending) == nil && len(pending) == 1
				}, 30*time.Second, 50*time.Millisecond)
				sc.decide(ctx, t, e.client, run, pending[0].Outcome)
			}
			_ = run.Get(ctx, nil) // the history, not the result, is what is kept
			writeHistory(ctx, t, e.client, run, prefix+strings.ReplaceAll(sc.name, " ", "-"))
		})
	}
}

// writeHistory writes run's history under historiesDir as name.json.
func writeHistory(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, name string) {
	t.Helper()
	writeHistoryTo(ctx, t, c, run, historiesDir, name)
}

// signalDecision returns a decide function that signals action.
func signalDecision(action decision.Action, result string) func(context.Context, *testing.T, client.Client, client.WorkflowRun, activity.IndeterminateOutcome) {
	return func(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, o activity.IndeterminateOutcome) {
		d := decision.Decision{Key: o.Key, Action: action, By: "ops@acme"}
		if result != "" {
			d.Result = []byte(result)
		}
		require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName, d))
	}
}

// TestRecordHistories records the scenarios both the old router and the
// current one can run: the router off, on without a wait, and a decision
// by signal.
func TestRecordHistories(t *testing.T) {
	recordScenarios(t, []historyScenario{
		{name: "off-ok"},
		{name: "off-indeterminate", failures: 1},
		{name: "on-ok", opts: interceptor.Options{AwaitDecision: true}},
		{name: "on-signal-free", opts: interceptor.Options{AwaitDecision: true}, failures: 1,
			decide: signalDecision(decision.ActionFree, "")},
	})
}
