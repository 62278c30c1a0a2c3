package integration

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// The rollback after a behaviour switch (issue 45, item 11). A build with
// Options.ProbeOnSchedule on writes histories the previous release cannot
// replay (integration/testdata/previous-release-unreplayable.txt): where
// such a workflow first asks its probe again, it records
// ProbeOnScheduleChangeID and schedules one on-schedule activity; the
// previous release, which knows no such change, takes its per-ask path
// there. The previous release cannot be linked into this binary beside
// this one, so the "old build" here is its stand-in: this release's worker
// with the option off, under an interceptor (previousRelease) that answers
// the library's GetVersion for ProbeOnScheduleChangeID as code without the
// change does, DefaultVersion. The worker replayer shows it cannot replay
// the waiting workflow's history; unversioned, a rollback to it wedges the
// workflow (its pending query fails, its workflow tasks fail); under Worker
// Deployment Versioning with pinned workflows the same rollback leaves the
// workflow on the build it started on: it stays Running, its pending query
// answers, a decision completes it with one booking, no workflow task of
// it fails, and new workflows go to the old build.

// previousRelease is the stand-in's workflow interceptor. Placed before
// the library's in a worker's interceptors, its outbound interceptor is
// the one the library's calls reach (the SDK chains outbound interceptors
// in the reverse order), so the library's GetVersion calls go through it.
type previousRelease struct {
	sdkinterceptor.WorkerInterceptorBase
}

func (*previousRelease) InterceptWorkflow(_ workflow.Context, next sdkinterceptor.WorkflowInboundInterceptor) sdkinterceptor.WorkflowInboundInterceptor {
	return &previousReleaseInbound{WorkflowInboundInterceptorBase: sdkinterceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type previousReleaseInbound struct {
	sdkinterceptor.WorkflowInboundInterceptorBase
}

func (i *previousReleaseInbound) Init(outbound sdkinterceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&previousReleaseOutbound{WorkflowOutboundInterceptorBase: sdkinterceptor.WorkflowOutboundInterceptorBase{Next: outbound}})
}

type previousReleaseOutbound struct {
	sdkinterceptor.WorkflowOutboundInterceptorBase
}

// GetVersion answers ProbeOnScheduleChangeID as the previous release's
// code, which never asks it, behaves: the change is not there.
func (o *previousReleaseOutbound) GetVersion(ctx workflow.Context, changeID string, minSupported, maxSupported workflow.Version) workflow.Version {
	if changeID == wire.ProbeOnScheduleChangeID {
		return workflow.DefaultVersion
	}
	return o.Next.GetVersion(ctx, changeID, minSupported, maxSupported)
}

// buildOptions are the SDK worker options of a build, under deployment
// (pinned by default) when it is set.
func buildOptions(deployment *sdkworker.WorkerDeploymentVersion) sdkworker.Options {
	o := workerOptions
	if deployment != nil {
		o.Identity = deployment.BuildID
		o.DeploymentOptions = sdkworker.DeploymentOptions{
			UseVersioning:             true,
			Version:                   *deployment,
			DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
		}
	}
	return o
}

// oldBuild is the stand-in for the previous release on queue (see above),
// booking through a, under deployment when set.
func oldBuild(t *testing.T, c client.Client, queue string, st store.Store, a *airline, deployment *sdkworker.WorkerDeploymentVersion) *worker.Worker {
	t.Helper()
	o := buildOptions(deployment)
	o.Interceptors = []sdkinterceptor.WorkerInterceptor{&previousRelease{}}
	opts := awaitOpts
	opts.Store = st
	w, err := worker.New(c, queue, worker.Options{Worker: o, Idempotency: opts, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	registerAirline(t, w, activity.KindEffectful, a)
	return w
}

// newBuild is this release's worker on queue with Options.ProbeOnSchedule
// on, booking through a (whose probe cannot tell), under deployment when
// set.
func newBuild(t *testing.T, c client.Client, queue string, st store.Store, a *airline, deployment *sdkworker.WorkerDeploymentVersion) *worker.Worker {
	t.Helper()
	o := buildOptions(deployment)
	opts := awaitOpts
	opts.ProbeOnSchedule = true
	opts.Store = st
	w, err := worker.New(c, queue, worker.Options{Worker: o, Idempotency: opts, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	registerAirline(t, w, activity.KindEffectful, a)
	return w
}

// cannotTell is an airline whose first booking lands and loses its answer,
// and whose probe never tells: the call waits for a person, the probe
// asking on its schedule meanwhile.
func cannotTell(ledger *Ledger) *airline {
	a := &airline{ledger: ledger, lostAnswers: 1, probe: true}
	a.probeAnswer = func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
		return activity.AnswerCannotTell(), nil
	}
	return a
}

// waitOnSchedule starts OneBooking on queue and returns it once it waits
// for a person with the probe's on-schedule activity in its history.
func waitOnSchedule(ctx context.Context, t *testing.T, c client.Client, queue string) (client.WorkflowRun, activity.IndeterminateOutcome) {
	t.Helper()
	run, o := startWaiting(t, c, queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	require.True(t, o.Probe)
	require.Eventually(t, func() bool {
		_, onSchedule, _, _ := probeEvents(ctx, t, c, run)
		return onSchedule == 1
	}, 45*time.Second, 100*time.Millisecond, "the probe asks on its schedule in one activity")
	return run, o
}

// failedTasks counts the workflow task failures in run's history.
func failedTasks(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) int {
	t.Helper()
	n := 0
	for _, ev := range historyEvents(ctx, t, c, run) {
		if ev == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			n++
		}
	}
	return n
}

// pendingQuery asks run for its pending decisions within d.
func pendingQuery(ctx context.Context, c client.Client, run client.WorkflowRun, d time.Duration) ([]decision.PendingDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
	if err != nil {
		return nil, err
	}
	var pending []decision.PendingDecision
	return pending, v.Get(&pending)
}

// personCompletes decides run's wait on o as completed and checks the
// workflow ends with the airline's seat.
func personCompletes(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, o activity.IndeterminateOutcome) {
	t.Helper()
	_, err := decide(ctx, c, run, decision.Decision{Key: o.Key, Action: decision.ActionComplete,
		Result: json.RawMessage(`"seat 1 on BA117"`), By: "ops@acme"})
	require.NoError(t, err)
	var seat string
	require.NoError(t, run.Get(ctx, &seat))
	assert.Equal(t, "seat 1 on BA117", seat)
}

// The hazard: the old build cannot replay a waiting workflow's history
// (the worker replayer says so), and with unversioned workers a rollback
// to it wedges the workflow: its pending query fails and its tasks fail.
// Rolling forward again lets a person's decision complete it, one booking.
func TestRollbackUnversionedWedgesWaits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 3*time.Minute)
	defer cancel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	logger := zaptest.NewLogger(t)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	queue := testenv.UniqueName("tq")
	ledger := newLedger()

	w := newBuild(t, c, queue, st, cannotTell(ledger), nil)
	require.NoError(t, w.Start())
	stopNew := sync.OnceFunc(w.Stop)
	t.Cleanup(stopNew)
	run, o := waitOnSchedule(ctx, t, c, queue)

	// The old build's code does not replay what the new build wrote.
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	for _, previous := range []bool{false, true} {
		ic, err := interceptor.New(interceptor.Options{AwaitDecision: true, Store: st})
		require.NoError(t, err)
		interceptors := []sdkinterceptor.WorkerInterceptor{ic}
		if previous {
			interceptors = []sdkinterceptor.WorkerInterceptor{&previousRelease{}, ic}
		}
		replayer, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
			Interceptors:       interceptors,
			ContextPropagators: []workflow.ContextPropagator{interceptor.TenantPropagator()},
		})
		require.NoError(t, err)
		replayer.RegisterWorkflow(OneBooking)
		err = replayer.ReplayWorkflowHistory(nil, hist)
		ic.Stop()
		if !previous {
			require.NoError(t, err, "this release with the option off replays the waiting workflow")
			continue
		}
		require.Error(t, err, "the old build replays the waiting workflow")
		t.Logf("the old build replaying the waiting workflow: %v", err)
	}

	// Rollback: the new build's workers stop, the old build's poll.
	stopNew()
	old := oldBuild(t, c, queue, st, cannotTell(ledger), nil)
	require.NoError(t, old.Start())
	stopOld := sync.OnceFunc(old.Stop)
	t.Cleanup(stopOld)
	_, err = pendingQuery(ctx, c, run, 20*time.Second)
	require.Error(t, err, "the pending query answers on the old build")
	t.Logf("pending query after an unversioned rollback: %v", err)
	// Anything that gives the workflow a task (here a signal; a timer
	// firing, an activity ending) hands it to the old build, which fails it.
	require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "nudge", nil))
	require.Eventually(t, func() bool { return failedTasks(ctx, t, c, run) > 0 },
		30*time.Second, 200*time.Millisecond, "the old build fails the workflow's tasks")
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	t.Logf("after the rollback: %s, %d workflow tasks failed", desc.GetWorkflowExecutionInfo().GetStatus(), failedTasks(ctx, t, c, run))

	// Roll forward: the new build completes it once a person decides.
	stopOld()
	w2 := newBuild(t, c, queue, st, cannotTell(ledger), nil)
	require.NoError(t, w2.Start())
	t.Cleanup(w2.Stop)
	personCompletes(ctx, t, c, run, o)
	assert.Equal(t, 1, ledger.Effects("BA117"), "one booking")
}

// The cure: both builds run under Worker Deployment Versioning with
// workflows pinned. A workflow started while the new build was current
// stays on it after the deployment's current version is set back to the
// old build: no task of it reaches the old build, its pending query
// answers, a person's decision completes it with one booking. A workflow
// started after the rollback runs on the old build.
func TestRollbackPinnedKeepsWaitsOnTheirBuild(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 3*time.Minute)
	defer cancel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	logger := zaptest.NewLogger(t)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	queue := testenv.UniqueName("tq")
	ledger := newLedger()
	name := testenv.UniqueName("deploy")
	oldV := sdkworker.WorkerDeploymentVersion{DeploymentName: name, BuildID: "build-old"}
	newV := sdkworker.WorkerDeploymentVersion{DeploymentName: name, BuildID: "build-new"}
	handle := c.WorkerDeploymentClient().GetHandle(name)
	setCurrent := func(buildID string) {
		t.Helper()
		require.Eventually(t, func() bool {
			_, err := handle.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID})
			if err != nil {
				t.Logf("set current version %s: %v", buildID, err)
			}
			return err == nil
		}, 30*time.Second, 250*time.Millisecond, "the deployment's current version becomes %s", buildID)
	}

	// The old build runs and is current; the new build is deployed beside
	// it and made current.
	old := oldBuild(t, c, queue, st, &airline{ledger: ledger, probe: true}, &oldV)
	require.NoError(t, old.Start())
	t.Cleanup(old.Stop)
	setCurrent(oldV.BuildID)
	w := newBuild(t, c, queue, st, cannotTell(ledger), &newV)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	setCurrent(newV.BuildID)

	run, o := waitOnSchedule(ctx, t, c, queue)
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	vi := desc.GetWorkflowExecutionInfo().GetVersioningInfo()
	require.Equal(t, enumspb.VERSIONING_BEHAVIOR_PINNED, vi.GetBehavior())
	require.Equal(t, newV.BuildID, vi.GetDeploymentVersion().GetBuildId(), "pinned to the build it started on")

	// Rollback: the old build becomes current again, both keep polling.
	setCurrent(oldV.BuildID)

	// A new workflow runs on the old build.
	later, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue},
		OneBooking, "LH400", 10*time.Second, 100*time.Millisecond)
	require.NoError(t, err)
	var seat string
	require.NoError(t, later.Get(ctx, &seat))
	assert.True(t, strings.HasPrefix(seat, "seat 1 on LH400"), seat)
	desc, err = c.DescribeWorkflowExecution(ctx, later.GetID(), later.GetRunID())
	require.NoError(t, err)
	assert.Equal(t, oldV.BuildID, desc.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId(),
		"a workflow started after the rollback runs on the old build")

	// The waiting workflow stays on the new build.
	pending, err := pendingQuery(ctx, c, run, 20*time.Second)
	require.NoError(t, err, "the pending query answers after the rollback")
	require.Len(t, pending, 1)
	require.NotNil(t, pending[0].Probe)
	assert.True(t, pending[0].Probe.OnSchedule)
	desc, err = c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())
	assert.Equal(t, newV.BuildID, desc.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId())

	personCompletes(ctx, t, c, run, o)
	assert.Zero(t, failedTasks(ctx, t, c, run), "no task of the workflow failed")
	assert.Equal(t, 1, ledger.Effects("BA117"), "one booking")
	assert.Equal(t, 1, ledger.Effects("LH400"))
	_, onSchedule, _, _ := probeEvents(ctx, t, c, run)
	assert.Equal(t, 1, onSchedule)
	// Every task of it, the probe's activity among them, ran on the new
	// build (each build's workers carry its build ID as their identity).
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	started := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		var identity string
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			identity = ev.GetWorkflowTaskStartedEventAttributes().GetIdentity()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			identity = ev.GetActivityTaskStartedEventAttributes().GetIdentity()
		default:
			continue
		}
		started++
		assert.Equal(t, newV.BuildID, identity, "event %d (%s) taken by the new build", ev.GetEventId(), ev.GetEventType())
	}
	t.Logf("%d workflow and activity tasks of the waiting workflow, all on %s", started, newV.BuildID)
}
