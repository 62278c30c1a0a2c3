package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
