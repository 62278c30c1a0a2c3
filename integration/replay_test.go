package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
)

// historiesDir holds workflow histories recorded against the in-process
// server by TestRecordHistories, committed so that every later version of
// the router must replay them.
const historiesDir = "testdata/histories"

// recordEnv names the environment variable that makes TestRecordHistories
// (re)write the histories; its value prefixes their file names ("old-" for
// histories recorded with an earlier router, "new-" for the current one).
const recordEnv = "IDEMPOTENCY_RECORD_HISTORIES"

// unreplayable lists histories the current router cannot replay, and why.
var unreplayable = map[string]string{
	"old-on-signal-free.json": "recorded by the pre-release router (before RouterChangeID), which waited without " +
		"recording that it did; such a run is told apart from one that was not routed by nothing in its history",
}

// replayConfigs are the worker configurations every history must replay
// under: the router off and on, and DecisionTimeout removed, shortened and
// lengthened.
var replayConfigs = []struct {
	name string
	opts interceptor.Options
}{
	{"off", interceptor.Options{}},
	{"on", interceptor.Options{AwaitDecision: true}},
	{"on-timeout-1s", interceptor.Options{AwaitDecision: true, DecisionTimeout: time.Second}},
	{"on-timeout-1h", interceptor.Options{AwaitDecision: true, DecisionTimeout: time.Hour}},
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
				r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
					Interceptors:       []sdkinterceptor.WorkerInterceptor{ic},
					ContextPropagators: []workflow.ContextPropagator{interceptor.TenantPropagator()},
				})
				require.NoError(t, err)
				r.RegisterWorkflow(OneBooking)
				r.RegisterWorkflow(BookLocally)
				r.RegisterWorkflow(BookOrGiveUp)
				err = r.ReplayWorkflowHistoryFromJSONFile(nil, file)
				if why, ok := unreplayable[filepath.Base(file)]; ok {
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
	decide   func(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, o activity.IndeterminateOutcome)
	// workflow and args default to OneBooking("BA117", 10s, 100ms).
	workflow any
	args     []any
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
			a := &airline{failures: sc.failures, ledger: e.ledger}
			require.NoError(t, e.worker.Register(activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
			e.worker.RegisterWorkflow(OneBooking)
			e.worker.RegisterWorkflow(BookLocally)
			e.start()
			ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
			defer cancel()
			wf, args := sc.workflow, sc.args
			if wf == nil {
				wf, args = OneBooking, []any{"BA117", 10 * time.Second, 100 * time.Millisecond}
			}
			run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: testenv.UniqueName("wf"), TaskQueue: e.queue,
			}, wf, args...)
			require.NoError(t, err)
			if sc.decide != nil {
				var pending []interceptor.PendingDecision
				require.Eventually(t, func() bool {
					v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), interceptor.PendingQuery)
					return err == nil && v.Get(&pending) == nil && len(pending) == 1
				}, 30*time.Second, 50*time.Millisecond)
				sc.decide(ctx, t, e.client, run, pending[0].Outcome)
			}
			_ = run.Get(ctx, nil) // the history, not the result, is what is kept
			var h historypb.History
			it := e.client.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, 0)
			for it.HasNext() {
				ev, err := it.Next()
				require.NoError(t, err)
				h.Events = append(h.Events, ev)
			}
			b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&h)
			require.NoError(t, err)
			name := prefix + strings.ReplaceAll(sc.name, " ", "-") + ".json"
			require.NoError(t, os.WriteFile(filepath.Join(historiesDir, name), b, 0o644))
		})
	}
}

// signalDecision returns a decide function that signals action.
func signalDecision(action interceptor.Action, result string) func(context.Context, *testing.T, client.Client, client.WorkflowRun, activity.IndeterminateOutcome) {
	return func(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, o activity.IndeterminateOutcome) {
		d := interceptor.Decision{Key: o.Key, Action: action, By: "ops@acme"}
		if result != "" {
			d.Result = []byte(result)
		}
		require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), interceptor.DecisionSignal, d))
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
			decide: signalDecision(interceptor.ActionFree, "")},
	})
}
