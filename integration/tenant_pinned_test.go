package integration

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// bookingWorker starts a worker on queue that hosts OneBooking and a's
// Book, declared EFFECTFUL, with opts on st; the returned function stops
// it (the test's cleanup does too). Workers started one after another on
// one queue share a's ledger, as redeployed workers share the airline.
func bookingWorker(t *testing.T, c client.Client, queue string, st store.Store, a *airline, opts interceptor.Options, events *eventLog) (stop func()) {
	t.Helper()
	logger := zaptest.NewLogger(t)
	opts.Store, opts.Observer = st, events
	w, err := worker.New(c, queue, worker.Options{Worker: workerOptions, Idempotency: opts, Logger: logger})
	require.NoError(t, err)
	require.NoError(t, w.Register(activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
	w.RegisterWorkflow(OneBooking)
	require.NoError(t, w.Start())
	var once sync.Once
	stop = func() { once.Do(w.Stop) }
	t.Cleanup(stop)
	return stop
}

// pendingOf waits until run's pending query lists exactly one wait and
// returns it.
func pendingOf(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) activity.IndeterminateOutcome {
	t.Helper()
	var pending []decision.PendingDecision
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
		return err == nil && v.Get(&pending) == nil && len(pending) == 1 && pending[0].Rejected == nil
	}, 30*time.Second, 50*time.Millisecond, "the workflow waits for a person")
	return pending[0].Outcome
}

// A workflow started without a tenant header or memo runs under the
// worker's DefaultTenant "acme": its booking lands, the answer is lost, and
// it waits for a person. The workers are redeployed with DefaultTenant
// "acme-eu" and a person confirms the booking. The new worker replays the
// workflow under the tenant its history fixed, "acme": the call run again
// after the decision finds the person's answer under acme's key, and the
// seat is booked once. (Before, the replay took the tenant from the new
// configuration, derived the key under acme-eu, found nothing and booked
// again.)
func TestTenantDefaultFixedAcrossRedeploy(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		logger := zaptest.NewLogger(t)
		c := newClient(server, worker.ClientOptions(client.Options{}, logger))
		queue := testenv.UniqueName("tq-redeploy")
		ledger := newLedger()
		a := &airline{lostAnswers: 1, ledger: ledger}
		events := &eventLog{}
		opts := interceptor.Options{Lease: 2 * time.Second, AwaitDecision: true}

		acme := opts
		acme.DefaultTenant = "acme"
		stopAcme := bookingWorker(t, c, queue, st, a, acme, events)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// No interceptor.WithTenant: the start carries no tenant header,
		// as one from the temporal CLI, the Web UI or a schedule.
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue},
			OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
		require.NoError(t, err)
		o := pendingOf(ctx, t, c, run)
		require.Equal(t, "acme", o.Tenant, "the first worker's default")
		require.Equal(t, 1, ledger.Effects("BA117"), "the booking landed; its answer was lost")

		stopAcme()
		eu := opts
		eu.DefaultTenant = "acme-eu"
		bookingWorker(t, c, queue, st, a, eu, events)

		res, err := decide(ctx, c, run, decision.Decision{Key: o.Key, Action: decision.ActionComplete,
			Result: json.RawMessage(`"seat 1 on BA117, confirmed by the airline"`), By: "ops@acme", Reason: "the airline has it"})
		require.NoError(t, err)
		assert.Equal(t, decision.AppliedRecorded, res.Applied)
		var seat string
		require.NoError(t, run.Get(ctx, &seat))
		assert.Equal(t, "seat 1 on BA117, confirmed by the airline", seat)
		assert.Equal(t, 1, ledger.Effects("BA117"), "booked once: the call run again found the person's answer")
		assert.Equal(t, 1, ledger.Calls("BA117"))
		for _, ev := range events.all() {
			if ev.Key != "" {
				assert.Equal(t, "acme", ev.Tenant, "%s under the tenant the history fixed", ev.Kind)
			}
		}
	})
}
