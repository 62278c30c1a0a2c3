package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// TenantTaggedBooking books once with an activity ID that names the
// workflow's tenant, as a workflow that routes or labels its calls per
// tenant does: the tenant it runs under shows in its history's commands,
// so a replay under another tenant is a non-determinism error.
func TenantTaggedBooking(ctx workflow.Context, flight string) (string, error) {
	tenant, _ := interceptor.WorkflowTenant(ctx)
	opts := workflow.GetActivityOptions(activityOptions(ctx, 10*time.Second, 100*time.Millisecond))
	opts.ActivityID = "book-for-" + tenant
	ctx = workflow.WithActivityOptions(ctx, opts)
	var r string
	err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "tagged"}).Get(ctx, &r)
	return r, err
}

// Seat is what Reserve returns: a struct, so a decided result can carry a
// field it lacks.
type Seat struct {
	Number string `json:"number"`
	Flight string `json:"flight"`
}

// reserver holds Reserve; its first failures calls fail before anything is
// reserved.
type reserver struct {
	ledger   *Ledger
	failures int
}

func (r *reserver) Reserve(_ context.Context, req BookRequest) (Seat, error) {
	call := r.ledger.call(req.Flight)
	if call <= r.failures {
		return Seat{}, fmt.Errorf("reservations: gateway timeout on call %d", call)
	}
	return Seat{Number: fmt.Sprint(r.ledger.effect(req.Flight)), Flight: req.Flight}, nil
}

// ReserveOn reserves a seat on an activity worker of another task queue,
// as a deployment with split workflow and activity workers does.
func ReserveOn(ctx workflow.Context, flight, queue string) (Seat, error) {
	ctx = workflow.WithTaskQueue(activityOptions(ctx, 10*time.Second, 100*time.Millisecond), queue)
	var s Seat
	err := workflow.ExecuteActivity(ctx, "Reserve", BookRequest{Flight: flight, RequestID: "split"}).Get(ctx, &s)
	return s, err
}

// recordPrefix returns the prefix histories are recorded under, or skips.
func recordPrefix(t *testing.T) string {
	t.Helper()
	prefix, ok := os.LookupEnv(recordEnv)
	if !ok {
		t.Skip("set " + recordEnv + "=gen3- to record the histories again")
	}
	require.NoError(t, os.MkdirAll(historiesDir, 0o755))
	return prefix
}

// completeBy returns a decide function that completes the wait by update
// with result, decided by ops.
func completeBy(result string) func(context.Context, *testing.T, client.Client, client.WorkflowRun, activity.IndeterminateOutcome) {
	return func(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, o activity.IndeterminateOutcome) {
		_, err := decide(ctx, c, run, decision.Decision{Key: o.Key, Action: decision.ActionComplete,
			Result: json.RawMessage(result), By: "ops@acme", Reason: "the airline has it"})
		require.NoError(t, err)
	}
}

// TestRecordRecoveryHistories records the runs the recovery paths of issue
// 17 replay from, with whatever code records them (new-: the code before
// the fixes; gen3-: after): a workflow that takes its tenant from the
// worker's DefaultTenant, or has none; two decisions delivered in one
// workflow task; and decisions accepted by a split workflow worker that
// holds no declarations, with a result field the declared type lacks.
func TestRecordRecoveryHistories(t *testing.T) {
	prefix := recordPrefix(t)
	acme := interceptor.Options{AwaitDecision: true, DefaultTenant: "acme"}
	recordScenarios(t, []historyScenario{
		{name: "on-default-tenant-complete", opts: acme, noTenant: true, lostAnswers: 1,
			decide: completeBy(`"seat 1 on BA117, confirmed by the airline"`)},
		{name: "off-default-tenant-ok", opts: interceptor.Options{DefaultTenant: "acme"}, noTenant: true},
		{name: "on-no-tenant", opts: awaitOpts, noTenant: true},
	})
	for _, second := range []string{"signal", "update"} {
		t.Run("two decisions: signal then "+second, func(t *testing.T) {
			recordDecisionsInOneTask(t, prefix+"on-signal-then-"+second+"-one-task", second)
		})
	}
	for _, by := range []string{"update", "signal"} {
		t.Run("split: "+by+" with a field the type lacks", func(t *testing.T) {
			recordSplitExtraField(t, prefix+"on-split-"+by+"-extra-field", by)
		})
	}
}

// TestRecordPinnedHistories records runs only the code that fixes a
// workflow's tenant by its history can make replay under another
// DefaultTenant (record with gen3- or later).
func TestRecordPinnedHistories(t *testing.T) {
	recordPrefix(t)
	acme := interceptor.Options{AwaitDecision: true, DefaultTenant: "acme"}
	recordScenarios(t, []historyScenario{
		{name: "on-tenant-tagged", opts: acme, noTenant: true, workflow: TenantTaggedBooking, args: []any{"BA117"}},
		{name: "on-tenant-tagged-none", opts: awaitOpts, noTenant: true, workflow: TenantTaggedBooking, args: []any{"BA117"}},
		{name: "on-memo-not-a-string", opts: acme, noTenant: true, memo: map[string]any{interceptor.TenantMemo: 42}},
	})
}

// recordDecisionsInOneTask records a waiting OneBooking that receives two
// decisions in one workflow task: Alice's complete by signal, then Bob's
// free by signal or update, sent while no worker polls.
func recordDecisionsInOneTask(t *testing.T, name, second string) {
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	c := newClient(server, worker.ClientOptions(client.Options{}, zaptest.NewLogger(t)))
	queue := testenv.UniqueName("tq-rec")
	a := &airline{failures: 1, ledger: newLedger()}
	events := &eventLog{}
	stop := bookingWorker(t, c, queue, st, a, awaitOpts, events)
	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue},
		OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	require.NoError(t, err)
	o := pendingOf(ctx, t, c, run)
	stop()
	require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName, decision.Decision{
		Key: o.Key, Action: decision.ActionComplete, Result: json.RawMessage(`"seat 9 on BA117, says alice"`), By: "alice"}))
	bob := decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "bob"}
	if second == "signal" {
		require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName, bob))
	} else {
		go func() {
			if h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
				WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateID: "bob", UpdateName: decision.UpdateName,
				Args: []any{bob}, WaitForStage: client.WorkflowUpdateStageCompleted,
			}); err == nil {
				_ = h.Get(ctx, nil)
			}
		}()
		awaitAdmitted(ctx, t, c, run, "bob")
	}
	bookingWorker(t, c, queue, st, a, awaitOpts, events)
	_ = run.Get(ctx, nil)
	writeHistory(ctx, t, c, run, name)
}

// recordSplitExtraField records ReserveOn routed by a workflow worker that
// holds no declarations, decided complete (by update or signal) with a
// result that has a field Seat lacks: only checked to be JSON there, it is
// accepted.
func recordSplitExtraField(t *testing.T, name, by string) {
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	logger := zaptest.NewLogger(t)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	actsQueue, wfQueue := testenv.UniqueName("tq-acts"), testenv.UniqueName("tq-wf")
	acts, err := worker.New(c, actsQueue, worker.Options{Worker: workerOptions, Logger: logger,
		Idempotency: interceptor.Options{Store: st, Lease: 2 * time.Second}})
	require.NoError(t, err)
	r := &reserver{ledger: newLedger(), failures: 1}
	require.NoError(t, acts.Register(activity.MustDeclare(r.Reserve, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
	require.NoError(t, acts.Start())
	defer acts.Stop()
	wfs, err := worker.New(c, wfQueue, worker.Options{Worker: workerOptions, Logger: logger,
		Idempotency: interceptor.Options{Store: st, AwaitDecision: true}})
	require.NoError(t, err)
	wfs.RegisterWorkflow(ReserveOn)
	require.NoError(t, wfs.Start())
	defer wfs.Stop()

	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: wfQueue},
		ReserveOn, "BA117", actsQueue)
	require.NoError(t, err)
	o := pendingOf(ctx, t, c, run)
	d := decision.Decision{Key: o.Key, Action: decision.ActionComplete,
		Result: json.RawMessage(`{"number":"9","flight":"BA117","meal":"vegetarian"}`), By: "ops@acme"}
	if by == "update" {
		_, err = decide(ctx, c, run, d)
		require.NoError(t, err, "a worker without declarations only checks the result is JSON")
	} else {
		require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName, d))
	}
	var s Seat
	require.NoError(t, run.Get(ctx, &s))
	require.Equal(t, Seat{Number: "9", Flight: "BA117"}, s)
	writeHistory(ctx, t, c, run, name)
}
