package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

var registerPendingAttribute = sync.OnceValue(func() error {
	_, err := server.GetDefaultClient().OperatorService().AddSearchAttributes(context.Background(), &operatorservice.AddSearchAttributesRequest{
		Namespace: server.GetDefaultNamespace(),
		SearchAttributes: map[string]enumspb.IndexedValueType{
			interceptor.DefaultPendingSearchAttribute: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
		},
	})
	return err
})

// A waiting workflow sets the pending search attribute to its key, so a
// list query finds it (what `temporal workflow list --query` sends), and
// unsets it once decided.
func TestDecisionListQueryFindsWaitingWorkflows(t *testing.T) {
	t.Parallel()
	require.NoError(t, registerPendingAttribute())
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	opts := awaitOpts
	opts.PendingSearchAttribute = interceptor.DefaultPendingSearchAttribute
	e := newEnv(t, st, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, e.worker.Interceptor().CheckSearchAttribute(ctx, e.client, server.GetDefaultNamespace()))
	a := &airline{failures: 1, ledger: e.ledger}
	require.NoError(t, e.worker.Register(activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
	e.worker.RegisterWorkflow(OneBooking)
	e.start()

	run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	list := func(query string) []string {
		resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: server.GetDefaultNamespace(), Query: query,
		})
		require.NoError(t, err)
		var ids []string
		for _, ex := range resp.GetExecutions() {
			ids = append(ids, ex.GetExecution().GetWorkflowId())
		}
		return ids
	}
	byKey := fmt.Sprintf("%s = '%s'", interceptor.DefaultPendingSearchAttribute, o.Key)
	waiting := fmt.Sprintf("%s IS NOT NULL AND TaskQueue = '%s'", interceptor.DefaultPendingSearchAttribute, e.queue)
	require.Eventually(t, func() bool { return slices.Contains(list(byKey), run.GetID()) }, 30*time.Second, 100*time.Millisecond,
		"the list query by key finds the waiting workflow")
	assert.Equal(t, []string{run.GetID()}, list(waiting))

	// What `temporal workflow metadata` reads: the current details name
	// the key, and every handler is listed. (Without a description: the
	// SDK marks the options that carry one experimental.)
	v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	assert.Contains(t, md.GetCurrentDetails(), o.Key, "the current details show what the workflow waits on")
	assert.Contains(t, md.GetCurrentDetails(), "\n\nKEY: `"+o.Key+"`\n\n", "the key whole, on a line of its own")
	assert.True(t, strings.HasPrefix(md.GetCurrentDetails(), "**A person decides**"), "what to do comes first: %q", md.GetCurrentDetails())
	described := handlerDescriptions(&md)
	for _, name := range []string{decision.QueryName, decision.UpdateName, decision.SignalName} {
		_, listed := described[name]
		assert.True(t, listed, name)
	}

	_, err = decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"})
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	require.Eventually(t, func() bool { return len(list(waiting)) == 0 }, 30*time.Second, 100*time.Millisecond,
		"a decided workflow no longer carries the attribute")
}

// Where the namespace lacks the attribute, a worker built with worker.New
// does not start: its Start says how to create the attribute, and nothing
// runs. (Before, it started, and every waiting workflow's task then failed
// in a loop with BadSearchAttributes.)
func TestWorkerWithoutSearchAttributeDoesNotStart(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	opts := awaitOpts
	opts.PendingSearchAttribute = "IdempotencyNoSuchAttribute"
	e := newEnv(t, st, opts)
	a := &airline{ledger: e.ledger}
	require.NoError(t, e.worker.Register(activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
	e.worker.RegisterWorkflow(OneBooking)
	err = e.worker.Start()
	var saErr *interceptor.SearchAttributeError
	require.True(t, errors.As(err, &saErr), "Start: %v", err)
	assert.Equal(t, "IdempotencyNoSuchAttribute", saErr.Name)
	assert.Contains(t, err.Error(), "temporal operator search-attribute create --name IdempotencyNoSuchAttribute --type KeywordList")
	err = e.worker.Run(make(chan any))
	require.True(t, errors.As(err, &saErr), "Run: %v", err)

	// The attribute the namespace has: the same worker starts.
	opts.PendingSearchAttribute = interceptor.DefaultPendingSearchAttribute
	require.NoError(t, registerPendingAttribute())
	ok := newEnv(t, st, opts)
	ok.worker.RegisterWorkflow(OneBooking)
	ok.start()
}

// Where the namespace lacks the attribute and the library is installed as
// a plugin (which gets no client to ask with), Plugin.CheckSearchAttribute
// says how to create it, and the workflow waits and is decided without it.
func TestDecisionMissingSearchAttributeDegrades(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	opts := awaitOpts
	opts.PendingSearchAttribute = "IdempotencyNoSuchAttribute"
	events := &eventLog{}
	opts.Store, opts.Observer = st, events
	ledger := newLedger()
	a := &airline{failures: 1, ledger: ledger}
	logger := zaptest.NewLogger(t)
	p, err := worker.NewPlugin(worker.PluginOptions{
		Idempotency:  opts,
		Declarations: []*activity.Declaration{activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})},
		Logger:       logger,
	})
	require.NoError(t, err)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = p.CheckSearchAttribute(ctx, c, server.GetDefaultNamespace())
	var saErr *interceptor.SearchAttributeError
	require.True(t, errors.As(err, &saErr), "%v", err)
	assert.Contains(t, err.Error(), "temporal operator search-attribute create")
	queue := testenv.UniqueName("tq")
	wopts := workerOptions
	wopts.Plugins = []sdkworker.Plugin{p}
	w := sdkworker.New(c, queue, wopts)
	w.RegisterWorkflow(OneBooking)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	run, o := startWaiting(t, c, queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
	_, err = decide(ctx, c, run, decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"})
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
}

// TestRecordSearchAttributeHistory records a wait that set the pending
// search attribute (see TestRecordHistories).
func TestRecordSearchAttributeHistory(t *testing.T) {
	if _, ok := os.LookupEnv(recordEnv); ok {
		require.NoError(t, registerPendingAttribute())
	}
	recordScenarios(t, []historyScenario{
		{name: "on-search-attribute-free", failures: 1,
			opts:   interceptor.Options{AwaitDecision: true, PendingSearchAttribute: interceptor.DefaultPendingSearchAttribute},
			decide: updateDecision(decision.Decision{Action: decision.ActionFree, By: "ops@acme"})},
	})
}

// ManyBookings books n flights at once and returns their confirmations.
func ManyBookings(ctx workflow.Context, n int) ([]string, error) {
	ctx = activityOptions(ctx, 30*time.Second, 100*time.Millisecond)
	fs := make([]workflow.Future, n)
	for i := range fs {
		fs[i] = workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: fmt.Sprintf("F%03d", i), RequestID: "many"})
	}
	out := make([]string, n)
	for i, f := range fs {
		if err := f.Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// A workflow waiting for a person on 100 keys at once keeps running: the
// pending search attribute lists the keys that fit the server's limit on a
// value and says how many more there are, where it listed them all and the
// server terminated the workflow at about 30. Every wait is decided, and
// the workflow completes.
func TestHundredWaitsKeepTheWorkflowRunning(t *testing.T) {
	t.Parallel()
	require.NoError(t, registerPendingAttribute())
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	opts := awaitOpts
	opts.PendingSearchAttribute = interceptor.DefaultPendingSearchAttribute
	const n = 100
	e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{lostAnswers: n}, opts, ManyBookings)
	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 3*time.Minute)
	defer cancel()
	run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue}, ManyBookings, n)
	require.NoError(t, err)
	var pending []decision.PendingDecision
	require.Eventually(t, func() bool {
		v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
		return err == nil && v.Get(&pending) == nil && len(pending) == n
	}, 90*time.Second, 200*time.Millisecond, "the workflow waits on every key")

	desc, err := e.client.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())
	var listed []string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(
		desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[interceptor.DefaultPendingSearchAttribute], &listed))
	require.NotEmpty(t, listed)
	assert.Less(t, len(listed), n, "the attribute lists what fits")
	assert.Contains(t, listed[len(listed)-1], "more (query "+decision.QueryName+")")

	for _, p := range pending {
		seat := fmt.Sprintf("%q", "seat on "+p.Outcome.Key[:12])
		_, err := decide(ctx, e.client, run, decision.Decision{Key: p.Outcome.Key, Action: decision.ActionComplete,
			Result: json.RawMessage(seat), By: "ops@acme"})
		require.NoError(t, err)
	}
	var got []string
	require.NoError(t, run.Get(ctx, &got))
	assert.Len(t, got, n)
}

// The README's plugin path — the plugin in the options of a client built
// with the SDK's client.Dial, a worker built with the SDK's worker.New —
// makes the start check worker.New makes: where the namespace lacks the
// attribute the worker does not start, and Start says how to create it in
// that namespace. (Before, it started, and every waiting workflow's task
// failed in a loop while the library logged that it waited for a person.)
func TestPluginWithoutSearchAttributeDoesNotStart(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	logger := zaptest.NewLogger(t)
	a := &airline{ledger: newLedger()}
	newPlugin := func(attr string) *worker.Plugin {
		opts := awaitOpts
		opts.Store, opts.PendingSearchAttribute = st, attr
		p, err := worker.NewPlugin(worker.PluginOptions{
			Idempotency:  opts,
			Declarations: []*activity.Declaration{activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})},
			Logger:       logger,
		})
		require.NoError(t, err)
		return p
	}
	p := newPlugin("IdempotencyNoSuchAttribute")
	c := newClient(server, client.Options{Plugins: []client.Plugin{p}})
	t.Cleanup(c.Close)
	w := sdkworker.New(c, testenv.UniqueName("tq"), workerOptions)
	w.RegisterWorkflow(OneBooking)
	err = w.Start()
	var saErr *interceptor.SearchAttributeError
	require.True(t, errors.As(err, &saErr), "Start: %v", err)
	assert.Equal(t, "IdempotencyNoSuchAttribute", saErr.Name)
	assert.Equal(t, server.GetDefaultNamespace(), saErr.Namespace)
	assert.Contains(t, err.Error(), "temporal operator search-attribute create --namespace "+server.GetDefaultNamespace()+" --name IdempotencyNoSuchAttribute --type KeywordList")
	err = w.Run(make(chan any))
	require.True(t, errors.As(err, &saErr), "Run: %v", err)

	// The attribute the namespace has: the same path starts.
	require.NoError(t, registerPendingAttribute())
	ok := newPlugin(interceptor.DefaultPendingSearchAttribute)
	c2 := newClient(server, client.Options{Plugins: []client.Plugin{ok}})
	t.Cleanup(c2.Close)
	w2 := sdkworker.New(c2, testenv.UniqueName("tq"), workerOptions)
	w2.RegisterWorkflow(OneBooking)
	require.NoError(t, w2.Start())
	t.Cleanup(w2.Stop)
}

// A plugin given to the worker alone knows no client to ask the namespace
// with: its worker starts, and the log says, once, that the attribute was
// not checked and how to have it checked.
func TestPluginOnTheWorkerOnlyWarnsOfTheUncheckedAttribute(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	core, logs := observer.New(zapcore.WarnLevel)
	opts := awaitOpts
	opts.Store, opts.PendingSearchAttribute = st, "IdempotencyNoSuchAttribute"
	p, err := worker.NewPlugin(worker.PluginOptions{Idempotency: opts, Logger: zap.New(core)})
	require.NoError(t, err)
	c := newClient(server, worker.ClientOptions(client.Options{}, zaptest.NewLogger(t)))
	t.Cleanup(c.Close)
	wopts := workerOptions
	wopts.Plugins = []sdkworker.Plugin{p}
	for range 2 {
		w := sdkworker.New(c, testenv.UniqueName("tq"), wopts)
		w.RegisterWorkflow(OneBooking)
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}
	warned := logs.FilterMessageSnippet("was not asked whether it has the pending search attribute").All()
	require.Len(t, warned, 1, "once per plugin")
	assert.Contains(t, warned[0].Message, "Plugin.CheckSearchAttribute")
	assert.Equal(t, "IdempotencyNoSuchAttribute", warned[0].ContextMap()["search_attribute"])
}
