package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// OneBookingRetried books flight once, under the SDK's default retry policy
// (retried until it succeeds), as most workflows call activities.
func OneBookingRetried(ctx workflow.Context, flight string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 1},
	})
	var r string
	err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight}).Get(ctx, &r)
	return r, err
}

// A worker whose Options.Tenant function resolves no tenant (a worker
// misconfigured for namespace-per-tenant) refuses the call retryably, and
// the run blocks instead of failing: once a worker with a working function
// replaces it, the call's next attempt runs, books once, and the workflow
// completes. (Before, the refusal was non-retryable and the run failed, lost
// to the fix.)
func TestMisconfiguredTenantFuncBlocksUntilFixed(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		logger := zaptest.NewLogger(t)
		c := newClient(server, worker.ClientOptions(client.Options{}, logger))
		queue := testenv.UniqueName("tq")
		events := &eventLog{}
		a := &airline{ledger: newLedger()}
		replica := func(tenant interceptor.TenantFunc) *worker.Worker {
			w, err := worker.New(c, queue, worker.Options{
				Worker:      sdkworker.Options{WorkerStopTimeout: 30 * time.Second},
				Idempotency: interceptor.Options{Store: st, Observer: events, Lease: 2 * time.Second, Tenant: tenant},
				Logger:      logger,
			})
			require.NoError(t, err)
			require.NoError(t, w.Register(activity.Effectful(a.Book, "flight")))
			w.RegisterWorkflow(OneBookingRetried)
			require.NoError(t, w.Start())
			return w
		}
		broken := replica(func(context.Context, sdkactivity.Info) (string, bool) { return "", false })

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: testenv.UniqueName("wf"), TaskQueue: queue,
		}, OneBookingRetried, "BA117")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return events.count(interceptor.EventMisconfigured) >= 2 }, 30*time.Second, 50*time.Millisecond,
			"the refusal is retried")
		desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		require.NoError(t, err)
		assert.Equal(t, "Running", desc.GetWorkflowExecutionInfo().GetStatus().String(), "the run waits for the fix")
		broken.Stop()

		fixed := replica(func(context.Context, sdkactivity.Info) (string, bool) { return "acme", true })
		t.Cleanup(fixed.Stop)
		var got string
		require.NoError(t, run.Get(ctx, &got))
		assert.True(t, strings.HasPrefix(got, "seat 1 on BA117"), got)
		assert.Equal(t, 1, a.ledger.Effects("BA117"), "booked once, by the fixed worker")
		assert.Zero(t, events.count(interceptor.EventIndeterminate))
	})
}

// A workflow that carries no tenant (started by a client without the
// propagator, no memo, a worker without DefaultTenant) fails at once: every
// attempt of its call carries the header it was scheduled with, so no retry
// could find one. It is not lost to the fix: once the worker has a
// DefaultTenant, a reset to its first workflow task (temporal workflow reset
// --type FirstWorkflowTask) runs it again, the new run records the default
// in force, and the call books once.
func TestNoTenantRunRecoveredByResetAfterTheFix(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	logger := zaptest.NewLogger(t)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	plain := server.GetDefaultClient() // no tenant propagator
	queue := testenv.UniqueName("tq")
	events := &eventLog{}
	a := &airline{ledger: newLedger()}
	replica := func(defaultTenant string) *worker.Worker {
		w, err := worker.New(c, queue, worker.Options{
			Worker:      sdkworker.Options{WorkerStopTimeout: 30 * time.Second},
			Idempotency: interceptor.Options{Store: st, Observer: events, Lease: 2 * time.Second, DefaultTenant: defaultTenant},
			Logger:      logger,
		})
		require.NoError(t, err)
		require.NoError(t, w.Register(activity.Effectful(a.Book, "flight")))
		w.RegisterWorkflow(OneBookingRetried)
		require.NoError(t, w.Start())
		return w
	}
	unset := replica("")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := plain.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: testenv.UniqueName("wf"), TaskQueue: queue,
	}, "OneBookingRetried", "BA117")
	require.NoError(t, err)
	requireNoTenant(t, run.Get(ctx, nil))
	assert.Equal(t, 1, events.count(interceptor.EventMisconfigured), "not retried: no attempt can carry a tenant")
	unset.Stop()

	fixed := replica("solo")
	t.Cleanup(fixed.Stop)
	var firstTaskDone int64
	it := plain.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, 0)
	for it.HasNext() && firstTaskDone == 0 {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType().String() == "WorkflowTaskCompleted" {
			firstTaskDone = ev.GetEventId()
		}
	}
	reset, err := plain.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 server.GetDefaultNamespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: run.GetID(), RunId: run.GetRunID()},
		Reason:                    "DefaultTenant set",
		WorkflowTaskFinishEventId: firstTaskDone,
		RequestId:                 testenv.UniqueName("reset"),
	})
	require.NoError(t, err)
	var got string
	require.NoError(t, plain.GetWorkflow(ctx, run.GetID(), reset.GetRunId()).Get(ctx, &got))
	assert.True(t, strings.HasPrefix(got, "seat 1 on BA117"), got)
	assert.Equal(t, 1, a.ledger.Effects("BA117"))
	var tenants []string
	for _, ev := range events.all() {
		if ev.Kind == interceptor.EventClaimed {
			tenants = append(tenants, ev.Tenant)
		}
	}
	assert.Equal(t, []string{"solo"}, tenants, "under the default the reset run recorded")
}
