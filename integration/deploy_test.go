package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// gateway is a payment gateway whose charge takes hold to land and is
// abandoned, uncharged, when the caller's context ends first, as an HTTP
// call made with the activity's context is.
type gateway struct {
	ledger  *Ledger
	hold    time.Duration
	entered chan struct{}
}

// ChargeRequest is the charge's argument.
type ChargeRequest struct {
	Order string `json:"order"`
}

func (g *gateway) Charge(ctx context.Context, req ChargeRequest) (string, error) {
	order := req.Order
	g.ledger.call(order)
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-time.After(g.hold):
	case <-ctx.Done():
		return "", fmt.Errorf("gateway: request aborted, nothing charged: %w", ctx.Err())
	}
	n := g.ledger.effect(order)
	return fmt.Sprintf("charge %d for %s", n, order), nil
}

// OneCharge charges order once.
func OneCharge(ctx workflow.Context, order string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 5},
	})
	var r string
	err := workflow.ExecuteActivity(ctx, "Charge", ChargeRequest{Order: order}).Get(ctx, &r)
	return r, err
}

// A rolling deploy: the worker running a charge is stopped (the SDK
// worker's Stop, as on SIGTERM) while the charge's body runs, and a new
// replica takes the task queue. Both replicas are built by worker.New with
// the SDK's WorkerStopTimeout left at zero, as most deployments leave it:
// the library's default stop timeout lets the body finish, so the charge
// lands once, the workflow gets its answer, and nobody is asked to decide
// anything. Under the SDK's own zero the body was abandoned mid-charge and
// the call stopped for a person although nothing had been charged.
func TestRollingDeployMidBodyAsksNobody(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		logger := zaptest.NewLogger(t)
		c := newClient(server, worker.ClientOptions(client.Options{}, logger))
		queue := testenv.UniqueName("tq")
		events := &eventLog{}
		g := &gateway{ledger: newLedger(), hold: 3 * time.Second, entered: make(chan struct{}, 1)}
		replica := func() *worker.Worker {
			w, err := worker.New(c, queue, worker.Options{
				Worker:      sdkworker.Options{}, // WorkerStopTimeout left zero
				Idempotency: interceptor.Options{Store: st, Observer: events, Lease: 2 * time.Second},
				Logger:      logger,
			})
			require.NoError(t, err)
			require.NoError(t, w.Register(activity.Effectful(g.Charge, "order")))
			w.RegisterWorkflow(OneCharge)
			require.NoError(t, w.Start())
			return w
		}
		old := replica()
		stopped := make(chan struct{})
		t.Cleanup(func() { <-stopped })

		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		order := testenv.UniqueName("order")
		run, err := c.ExecuteWorkflow(interceptor.WithTenant(ctx, "acme"), client.StartWorkflowOptions{
			ID: testenv.UniqueName("wf"), TaskQueue: queue,
		}, OneCharge, order)
		require.NoError(t, err)
		select {
		case <-g.entered:
		case <-ctx.Done():
			t.Fatal("the charge never started")
		}
		go func() { defer close(stopped); old.Stop() }() // SIGTERM mid-charge
		next := replica()
		t.Cleanup(next.Stop)

		var got string
		require.NoError(t, run.Get(ctx, &got), "the charge's answer reached the workflow")
		assert.Equal(t, "charge 1 for "+order, got)
		assert.Equal(t, 1, g.ledger.Effects(order), "charged once")
		assert.Equal(t, 1, g.ledger.Calls(order), "the body ran once")
		assert.Zero(t, events.count(interceptor.EventIndeterminate), "nobody is asked to decide")
		select {
		case <-stopped:
		case <-ctx.Done():
			t.Fatal("the stopped replica never finished stopping")
		}
	})
}
