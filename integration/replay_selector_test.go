package integration

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// BookOrGiveUp races a booking on queue against a short timer, and books a
// later flight when the timer wins. When the booking's completion and the
// timer arrive in one workflow task, which branch wins depends on when the
// booking's future becomes ready: the router must not change that for a run
// recorded without it, or the replay schedules another command.
func BookOrGiveUp(ctx workflow.Context, flight, queue string) (string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	ctx = workflow.WithTaskQueue(ctx, queue)
	booking := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "race"})
	timer := workflow.NewTimer(ctx, 300*time.Millisecond)
	var result string
	var err error
	booked := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(booking, func(f workflow.Future) { booked = true; err = f.Get(ctx, &result) })
	sel.AddFuture(timer, func(workflow.Future) {})
	sel.Select(ctx)
	if booked {
		return result, err
	}
	err = workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight + "-later", RequestID: "later"}).Get(ctx, &result)
	return result, err
}

// TestRecordSelectorHistories records BookOrGiveUp with the booking's
// completion and the timer in one workflow task: the workflow worker stops
// after the first task and a new one takes over once both have happened.
func TestRecordSelectorHistories(t *testing.T) {
	prefix, ok := os.LookupEnv(recordEnv)
	if !ok {
		t.Skip("set " + recordEnv + "=new- to record the histories again")
	}
	for _, sc := range []struct {
		name string
		opts interceptor.Options
	}{
		{"off-selector", interceptor.Options{}},
		{"on-selector", interceptor.Options{AwaitDecision: true}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			st, err := store.NewMemory(store.MemoryOptions{})
			require.NoError(t, err)
			acts := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{hold: 50 * time.Millisecond}, interceptor.Options{Lease: 2 * time.Second})
			logger := zaptest.NewLogger(t)
			c := newClient(server, worker.ClientOptions(client.Options{}, logger))
			queue := testenv.UniqueName("tq-race")
			newWorkflowWorker := func() *worker.Worker {
				opts := sc.opts
				opts.Store = st
				w, err := worker.New(c, queue, worker.Options{Worker: workerOptions, Idempotency: opts, Logger: logger})
				require.NoError(t, err)
				w.RegisterWorkflow(BookOrGiveUp)
				require.NoError(t, w.Start())
				return w
			}
			w1 := newWorkflowWorker()
			ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
			defer cancel()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue},
				BookOrGiveUp, "BA117", acts.queue)
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				for _, ev := range historyEvents(ctx, t, c, run) {
					if ev == enumspb.EVENT_TYPE_TIMER_STARTED {
						return true
					}
				}
				return false
			}, 30*time.Second, 10*time.Millisecond)
			w1.Stop()
			time.Sleep(time.Second) // the booking completes, the timer fires
			w2 := newWorkflowWorker()
			defer w2.Stop()
			_ = run.Get(ctx, nil)

			writeHistory(ctx, t, c, run, prefix+sc.name)
		})
	}
}
