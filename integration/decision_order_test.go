package integration

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// withTheFailure is a run of BookOn whose call failed indeterminate while
// no workflow worker polled, and whose person signalled a decision before
// one polled again: the failure and the signal reach the workflow in one
// workflow task.
type withTheFailure struct {
	run     client.WorkflowRun
	client  client.Client
	acts    *env
	st      store.Store
	key     string
	restart func() // starts a workflow worker again
}

// signalWithTheFailure sets up a withTheFailure run. BookOn's activity runs
// on a worker of its own queue, as in a split deployment: the booking
// lands, and while the body holds its answer the workflow worker is
// stopped. The answer is then lost (the call fails indeterminate), and a
// person who read the key where the dispatcher put it (the store's pending
// record, the event) signals d — as decision.Send does when the server
// takes no Update — before any workflow worker polls. The workflow worker
// is not started again: restart does that.
func signalWithTheFailure(ctx context.Context, t *testing.T, d decision.Decision) *withTheFailure {
	t.Helper()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	keys, release := make(chan string, 1), make(chan struct{})
	var once sync.Once
	a := &airline{lostAnswers: 1}
	a.landed = func(ctx context.Context) {
		once.Do(func() {
			k, _ := activity.Key(ctx)
			keys <- string(k)
			<-release
		})
	}
	acts := newAirlineEnvWith(t, st, activity.KindEffectful, a, interceptor.Options{Lease: 2 * time.Second})

	logger := zaptest.NewLogger(t)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	queue := testenv.UniqueName("tq-wf")
	startWorkflowWorker := func() (stop func()) {
		opts := awaitOpts
		opts.Store = st
		w, err := worker.New(c, queue, worker.Options{Worker: workerOptions, Idempotency: opts, Logger: logger})
		require.NoError(t, err)
		w.RegisterWorkflow(BookOn)
		require.NoError(t, w.Start())
		var stopOnce sync.Once
		stop = func() { stopOnce.Do(w.Stop) }
		t.Cleanup(stop)
		return stop
	}
	stop := startWorkflowWorker()

	run, err := c.ExecuteWorkflow(interceptor.WithTenant(ctx, "acme"),
		client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue}, BookOn, "BA117", acts.queue)
	require.NoError(t, err)
	var key string
	select {
	case key = <-keys:
	case <-ctx.Done():
		t.Fatal("the booking did not land")
	}
	stop() // nobody polls the workflow's queue from here
	close(release)
	require.Eventually(t, func() bool {
		for _, ev := range historyEvents(ctx, t, c, run) {
			if ev == enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED {
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the call fails indeterminate")
	d.Key = key
	require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName, d))
	return &withTheFailure{run: run, client: c, acts: acts, st: st, key: key, restart: func() { startWorkflowWorker() }}
}

// inOneTask asserts that, in r's history, no workflow task started between
// the call's failure and the decision signal.
func (r *withTheFailure) inOneTask(ctx context.Context, t *testing.T) {
	t.Helper()
	failed := -1
	for i, ev := range historyEvents(ctx, t, r.client, r.run) {
		switch ev {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			failed = i
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			require.Equal(t, -1, failed, "a workflow task started between the failure and the signal")
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			require.NotEqual(t, -1, failed, "the signal came before the failure")
			return
		}
	}
	t.Fatal("no signal in the history")
}

// settled waits until the workflow has taken the decision signal one way or
// the other: it ended, or its pending query lists the signal as rejected.
// It returns the rejections listed.
func (r *withTheFailure) settled(ctx context.Context, t *testing.T) []decision.RejectedDecision {
	t.Helper()
	var rejected []decision.RejectedDecision
	require.Eventually(t, func() bool {
		desc, err := r.client.DescribeWorkflowExecution(ctx, r.run.GetID(), r.run.GetRunID())
		require.NoError(t, err)
		if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return true
		}
		pending, err := decision.Pending(ctx, r.client, r.run.GetID(), r.run.GetRunID())
		if err != nil {
			return false // no worker has taken the task yet
		}
		rejected = rejected[:0]
		for _, p := range pending {
			if p.Rejected != nil {
				rejected = append(rejected, *p.Rejected)
			}
		}
		return len(rejected) > 0
	}, time.Minute, 50*time.Millisecond, "the workflow takes the signal")
	return rejected
}

// A person's decision signal that reaches the workflow in the same workflow
// task as the failure it decides is taken once the call's wait is open:
// the booking that landed is recorded as the person said, and the body is
// not run again. (Before DecisionOrderChangeID the signal was checked
// before the call had seen its failure, rejected with "no call is waiting",
// and the workflow waited for a decision it had been sent.)
func TestDecisionSignalWithTheFailureInOneTask(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := signalWithTheFailure(ctx, t, decision.Decision{Action: decision.ActionComplete,
		Result: json.RawMessage(`"seat 1 on BA117, per the airline"`), By: "ops@acme", Reason: "the airline has it"})
	r.restart()
	r.inOneTask(ctx, t)
	rejected := r.settled(ctx, t)
	require.Empty(t, rejected, "the signal, sent with the failure, was rejected")

	var seat string
	require.NoError(t, r.run.Get(ctx, &seat))
	assert.Equal(t, "seat 1 on BA117, per the airline", seat)
	assert.Equal(t, 1, r.acts.ledger.Calls("BA117"), "the body ran once")
	assert.Equal(t, 1, r.acts.ledger.Effects("BA117"), "one booking")
	assert.Equal(t, 1, resolvesScheduled(ctx, t, r.client, r.run), "the decision was recorded once")
	rec, err := r.st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: r.key})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State, "the record says what the person decided")
}

// TestRecordOrderHistories records a decision signal delivered with the
// failure it decides (record with gen4- for the code before
// DecisionOrderChangeID, gen5- or later after it). Where the code of the
// time rejected the signal, the person decides again by update once the
// wait is listed, so the run ends.
func TestRecordOrderHistories(t *testing.T) {
	prefix := recordPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := decision.Decision{Action: decision.ActionComplete,
		Result: json.RawMessage(`"seat 1 on BA117, per the airline"`), By: "ops@acme", Reason: "the airline has it"}
	r := signalWithTheFailure(ctx, t, d)
	r.restart()
	r.inOneTask(ctx, t)
	if rejected := r.settled(ctx, t); len(rejected) > 0 {
		t.Logf("the signal was rejected: %s", rejected[0].Reason)
		d.Key = r.key // the wait opened in the task that rejected the signal
		_, err := decide(ctx, r.client, r.run, d)
		require.NoError(t, err)
	}
	var seat string
	require.NoError(t, r.run.Get(ctx, &seat))
	require.Equal(t, "seat 1 on BA117, per the airline", seat)
	writeHistory(ctx, t, r.client, r.run, prefix+"on-signal-with-the-failure-one-task")
}
