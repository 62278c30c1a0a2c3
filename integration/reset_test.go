package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
)

// resetGoSignal lets BookThenWait finish.
const resetGoSignal = "go"

// BookThenWait books once, then waits for the go signal before it returns
// the booking: a workflow an operator resets while it waits.
func BookThenWait(ctx workflow.Context, flight string) (string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	var r string
	if err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "req-" + workflow.GetInfo(ctx).WorkflowExecution.RunID}).Get(ctx, &r); err != nil {
		return "", err
	}
	workflow.GetSignalChannel(ctx, resetGoSignal).Receive(ctx, nil)
	return r, nil
}

// resetToFirstTask resets run to its first workflow task, before any call
// it made, as `temporal workflow reset --type FirstWorkflowTask` does, and
// returns the new run.
func resetToFirstTask(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) client.WorkflowRun {
	t.Helper()
	var first int64
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && first == 0 {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			first = ev.GetEventId()
		}
	}
	require.NotZero(t, first)
	res, err := c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 server.GetDefaultNamespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: run.GetID(), RunId: run.GetRunID()},
		Reason:                    "a bug fixed",
		WorkflowTaskFinishEventId: first,
		RequestId:                 testenv.UniqueName("reset"),
	})
	require.NoError(t, err)
	require.NotEqual(t, run.GetRunID(), res.GetRunId())
	return c.GetWorkflow(ctx, run.GetID(), res.GetRunId())
}

// A workflow reset to before its EFFECTFUL call runs the call again in a
// new run: the call finds the record of the run it was reset from and
// answers from it. One booking, on every store.
func TestResetBeforeAnEffectfulCall(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{}, interceptor.Options{Lease: 2 * time.Second}, BookThenWait)
		ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
		defer cancel()
		run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue},
			BookThenWait, "BA117")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return e.events.count(interceptor.EventCompleted) == 1 }, 30*time.Second, 20*time.Millisecond)

		reset := resetToFirstTask(ctx, t, e.client, run)
		require.Eventually(t, func() bool {
			return e.events.count(interceptor.EventDeduplicated)+e.events.count(interceptor.EventCompleted) == 2
		}, 30*time.Second, 20*time.Millisecond, "the reset run's call ended")
		require.NoError(t, e.client.SignalWorkflow(ctx, reset.GetID(), reset.GetRunID(), resetGoSignal, nil))
		var got string
		require.NoError(t, reset.Get(ctx, &got))
		assert.Contains(t, got, "seat 1 on BA117")
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "the reset booked a second seat")
		assert.Equal(t, 1, e.events.count(interceptor.EventDeduplicated), "the reset run's call answered from the record")
	})
}

// A workflow reset while it waits for a person runs the call again in the
// new run, which finds the same indeterminate record and waits on it in
// turn; the person's decision, sent to the new run, settles it. One
// booking, and nothing left waiting.
func TestResetWhileWaitingForAPerson(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{lostAnswers: 1}, awaitOpts)
		run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		reset := resetToFirstTask(ctx, t, e.client, run)
		var pending []decision.PendingDecision
		require.Eventually(t, func() bool {
			v, err := e.client.QueryWorkflow(ctx, reset.GetID(), reset.GetRunID(), decision.QueryName)
			return err == nil && v.Get(&pending) == nil && len(pending) == 1
		}, 30*time.Second, 50*time.Millisecond, "the reset run waits on the same key")
		assert.Equal(t, o.Key, pending[0].Outcome.Key)

		res, err := decide(ctx, e.client, reset, decision.Decision{Key: o.Key, Action: decision.ActionComplete,
			Result: json.RawMessage(`"seat 1 on BA117 (confirmed by phone)"`), By: "ops@acme", Reason: "the airline has it"})
		require.NoError(t, err)
		assert.Equal(t, decision.AppliedRecorded, res.Applied)
		var got string
		require.NoError(t, reset.Get(ctx, &got))
		assert.Equal(t, "seat 1 on BA117 (confirmed by phone)", got)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "the reset booked a second seat")
		page, err := st.List(ctx, store.ListParams{Tenant: "acme", States: []store.State{store.StateIndeterminate, store.StatePending}})
		require.NoError(t, err)
		assert.Empty(t, page.Records, "a record is left waiting")
	})
}

// A workflow reset while it waits for a person: the record still names
// the run it was made in, which the reset ended. idempotencyctl decide
// follows the reset to the run that waits on the key now, and resolve
// refuses while that run waits, as it does for any waiting workflow.
func TestCtlDecideFollowsAReset(t *testing.T) {
	t.Parallel()
	st, global := ctlStore(t)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{lostAnswers: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reset := resetToFirstTask(ctx, t, e.client, run)
	require.Eventually(t, func() bool {
		var pending []decision.PendingDecision
		v, err := e.client.QueryWorkflow(ctx, reset.GetID(), reset.GetRunID(), decision.QueryName)
		return err == nil && v.Get(&pending) == nil && len(pending) == 1
	}, 30*time.Second, 50*time.Millisecond, "the reset run waits on the same key")

	r := ctl(t, temporalEnv(), append(global, "resolve", "-tenant", o.Tenant, "-key", o.Key, "-outcome", `"seat 1"`, "-by", "ops@acme")...)
	assert.Equal(t, 1, r.code, "resolve while the reset run waits; stdout: %s", r.stdout)
	assert.Contains(t, r.stderr, "waits on this key for a decision")

	r = ctl(t, temporalEnv(), append(global, "decide", "-tenant", o.Tenant, "-key", o.Key, "-by", "ops@acme",
		"-outcome", `"seat 1 on BA117, confirmed by phone"`)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "run "+reset.GetRunID()+" (reset from "+run.GetRunID()+")")
	var got string
	require.NoError(t, reset.Get(ctx, &got))
	assert.Equal(t, "seat 1 on BA117, confirmed by phone", got)
	assert.Equal(t, 1, e.ledger.Effects("BA117"))
}
