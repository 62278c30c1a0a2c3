package integration

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// BookOn books on an activity worker of another task queue, as a
// deployment with split workflow and activity workers does.
func BookOn(ctx workflow.Context, flight, queue string) (string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	ctx = workflow.WithTaskQueue(ctx, queue)
	var r string
	err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "split"}).Get(ctx, &r)
	return r, err
}

// BookLocally books through a local activity.
func BookLocally(ctx workflow.Context, flight string) (string, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 5},
	})
	var r string
	err := workflow.ExecuteLocalActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "local"}).Get(ctx, &r)
	return r, err
}

var awaitOpts = interceptor.Options{Lease: 2 * time.Second, AwaitDecision: true}

// startWaiting starts wf under tenant acme and returns it once the pending
// query lists exactly one wait.
func startWaiting(t *testing.T, c client.Client, queue string, wf any, args ...any) (client.WorkflowRun, activity.IndeterminateOutcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue}, wf, args...)
	require.NoError(t, err)
	var pending []decision.PendingDecision
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
		return err == nil && v.Get(&pending) == nil && len(pending) == 1
	}, 30*time.Second, 50*time.Millisecond, "the workflow publishes what it waits for")
	return run, pending[0].Outcome
}

// decide sends d as the decision update and waits for its answer.
func decide(ctx context.Context, c client.Client, run client.WorkflowRun, d any) (decision.Result, error) {
	var res decision.Result
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateName: decision.UpdateName,
		Args: []any{d}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return res, err
	}
	return res, h.Get(ctx, &res)
}

// historyEvents lists the event types of run's history.
func historyEvents(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) []enumspb.EventType {
	t.Helper()
	var out []enumspb.EventType
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		out = append(out, ev.GetEventType())
	}
	return out
}

// Every malformed decision is rejected by the update's validator: the
// caller reads the reason, the history holds nothing of it, and the wait
// goes on until a valid decision, whose update says what it did.
func TestDecisionUpdateRejectsThenApplies(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := historyEvents(ctx, t, e.client, run)

	for _, tc := range []struct {
		name   string
		d      any
		reason string
	}{
		{"unknown key", decision.Decision{Key: "v1:nobody", Action: decision.ActionFree, By: "ops@acme"}, "no call is waiting"},
		{"unknown action", decision.Decision{Key: o.Key, Action: "forget", By: "ops@acme"}, "unknown action"},
		{"complete without a result", decision.Decision{Key: o.Key, Action: decision.ActionComplete, By: "ops@acme"}, "needs a result"},
		{"result of the wrong type", decision.Decision{Key: o.Key, Action: decision.ActionComplete, Result: json.RawMessage(`{"seat":1}`), By: "ops@acme"}, "does not decode"},
		{"another tenant", decision.Decision{Key: o.Key, Action: decision.ActionFree, Tenant: "globex", By: "ops@acme"}, "tenant"},
		{"a typo'd field", map[string]any{"key": o.Key, "acton": "free"}, "unknown field"},
		{"a bare string", "free it", "not a decision"},
		{"nobody decided", decision.Decision{Key: o.Key, Action: decision.ActionFree}, "names no one"},
	} {
		_, err := decide(ctx, e.client, run, tc.d)
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.reason, tc.name)
	}
	assert.Equal(t, before, historyEvents(ctx, t, e.client, run), "a rejected update writes nothing to the history")

	res, err := decide(ctx, e.client, run, decision.Decision{
		Key: o.Key, Action: decision.ActionComplete, Result: json.RawMessage(`"seat 9 on BA117, confirmed by phone"`),
		By: "ops@acme", Reason: "the airline confirmed", Reference: "TICKET-7",
	})
	require.NoError(t, err)
	assert.Equal(t, decision.Result{Key: o.Key, Action: decision.ActionComplete, Applied: decision.AppliedRecorded}, res)
	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, "seat 9 on BA117, confirmed by phone", result)
	assert.Equal(t, 1, e.ledger.Calls("BA117"))
	assert.Equal(t, 0, e.ledger.Effects("BA117"))
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)

	_, err = decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"})
	require.Error(t, err, "a closed workflow takes no decision")
}

// A malformed signal changes nothing and is listed by the pending query
// with its reason; a valid signal still settles the wait.
func TestDecisionSignalRejectedThenApplied(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, e.client.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName,
		map[string]any{"key": o.Key, "action": "complete"}))
	var pending []decision.PendingDecision
	require.Eventually(t, func() bool {
		v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
		return err == nil && v.Get(&pending) == nil && len(pending) == 2
	}, 30*time.Second, 50*time.Millisecond)
	require.NotNil(t, pending[1].Rejected)
	assert.Contains(t, pending[1].Rejected.Reason, "needs a result")
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State, "the rejected signal changed nothing")

	require.NoError(t, e.client.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName,
		decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"}))
	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.True(t, strings.HasPrefix(result, "seat 1 on BA117"), result)
	assert.Equal(t, 1, e.ledger.Effects("BA117"))
}

// A workflow cancelled while it waits ends cancelled; the record stays
// indeterminate for a later decision.
func TestDecisionCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, e.client.CancelWorkflow(ctx, run.GetID(), run.GetRunID()))
	err = run.Get(ctx, nil)
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "%v", err)
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State)
	assert.Equal(t, 1, e.ledger.Calls("BA117"))
}

// A workflow worker that holds no declarations routes by the error alone.
func TestDecisionSplitWorkers(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	acts := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, interceptor.Options{Lease: 2 * time.Second})

	logger := zaptest.NewLogger(t)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	queue := testenv.UniqueName("tq-wf")
	opts := awaitOpts
	opts.Store = st
	w, err := worker.New(c, queue, worker.Options{Worker: workerOptions, Idempotency: opts, Logger: logger})
	require.NoError(t, err)
	w.RegisterWorkflow(BookOn)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run, o := startWaiting(t, c, queue, BookOn, "BA117", acts.queue)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := decide(ctx, c, run, decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"})
	require.NoError(t, err)
	assert.Equal(t, decision.AppliedFreed, res.Applied)
	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.True(t, strings.HasPrefix(result, "seat 1 on BA117"), result)
	assert.Equal(t, 2, acts.ledger.Calls("BA117"))
	assert.Equal(t, 1, acts.ledger.Effects("BA117"))
}

// A local activity that ends indeterminate waits for a person too.
func TestDecisionLocalActivity(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := newEnv(t, st, awaitOpts)
	a := &airline{failures: 1, ledger: e.ledger}
	require.NoError(t, e.worker.Register(activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
	e.worker.RegisterWorkflow(BookLocally)
	e.start()
	run, o := startWaiting(t, e.client, e.queue, BookLocally, "BA117")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionComplete, Result: json.RawMessage(`"seat 3 on BA117"`), By: "ops@acme"})
	require.NoError(t, err)
	var result string
	require.NoError(t, run.Get(ctx, &result))
	assert.Equal(t, "seat 3 on BA117", result)
	assert.Equal(t, 1, e.ledger.Calls("BA117"))
}

// A complete decision made after the record is gone (here: erased, as the
// sweeper does once the retention window ends) records the person's
// outcome; the retry answers from it instead of booking again.
func TestDecisionCompleteAfterTheRecordExpired(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
		run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := st.Forget(ctx, store.ForgetParams{Tenant: o.Tenant})
		require.NoError(t, err)
		res, err := decide(ctx, e.client, run, decision.Decision{
			Key: o.Key, Action: decision.ActionComplete, Result: json.RawMessage(`"seat 4 on BA117, per the airline"`), By: "ops@acme"})
		require.NoError(t, err)
		assert.Equal(t, decision.AppliedRecorded, res.Applied)
		var result string
		require.NoError(t, run.Get(ctx, &result))
		assert.Equal(t, "seat 4 on BA117, per the airline", result)
		assert.Equal(t, 1, e.ledger.Calls("BA117"), "the effect did not run again")
	})
}

// retry after a settlement made elsewhere (idempotencyctl resolve) answers
// from the record; fail ends the call with the indeterminate error and
// leaves the record for later. Neither runs the effect again.
func TestDecisionRetryAndFail(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		t.Run("retry", func(t *testing.T) {
			e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
			run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			outcome, err := interceptor.EncodeOutcome(nil, "seat 2 on BA117, settled by the operator")
			require.NoError(t, err)
			require.NoError(t, st.Resolve(ctx, store.ResolveParams{Tenant: o.Tenant, Key: o.Key, Decision: store.ActionComplete, Outcome: outcome}))
			res, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: "Retry", By: "ops@acme"})
			require.NoError(t, err)
			assert.Equal(t, decision.AppliedRetried, res.Applied)
			var result string
			require.NoError(t, run.Get(ctx, &result))
			assert.Equal(t, "seat 2 on BA117, settled by the operator", result)
			assert.Equal(t, 1, e.ledger.Calls("BA117"))
		})
		t.Run("fail", func(t *testing.T) {
			e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
			run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA118", 10*time.Second, 100*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionFail, By: "ops@acme"})
			require.NoError(t, err)
			assert.Equal(t, decision.AppliedFailed, res.Applied)
			requireIndeterminate(t, run.Get(ctx, nil), activity.ReasonBodyFailed)
			rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
			require.NoError(t, err)
			assert.Equal(t, store.StateIndeterminate, rec.State)
			assert.Equal(t, 1, e.ledger.Calls("BA118"))
		})
	})
}
