package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// stores are the stores every scenario runs against.
var stores = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"memory", func(t *testing.T) store.Store {
		s, err := store.NewMemory(store.MemoryOptions{})
		require.NoError(t, err)
		return s
	}},
	{"postgres", func(t *testing.T) store.Store {
		pool, schema := pgenv.Postgres(t)
		s, err := pgstore.New(pool, pgstore.Options{Schema: schema})
		require.NoError(t, err)
		require.NoError(t, s.EnsureSchema(context.Background()))
		t.Cleanup(s.Close)
		return s
	}},
	{"redis", func(t *testing.T) store.Store {
		rc, prefix := redisenv.Redis(t)
		s, err := redisstore.New(rc, redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// BookRequest is the booking activity's argument. RequestID is fresh on
// every call, which is why it is not a key argument.
type BookRequest struct {
	Flight    string `json:"flight"`
	RequestID string `json:"request_id"`
}

// Ledger counts side effects: one entry per time an activity body took
// effect. Tests assert on it, never on logs.
type Ledger struct {
	mu      sync.Mutex
	effects map[string]int
	calls   map[string]int
}

func newLedger() *Ledger {
	return &Ledger{effects: map[string]int{}, calls: map[string]int{}}
}

func (l *Ledger) call(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[name]++
	return l.calls[name]
}

func (l *Ledger) effect(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.effects[name]++
	return l.effects[name]
}

// Effects returns how many times name took effect.
func (l *Ledger) Effects(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.effects[name]
}

// Calls returns how many times name's body was entered.
func (l *Ledger) Calls(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[name]
}

// env is one test's worker, client and ledger on a task queue of its own.
type env struct {
	t      *testing.T
	client client.Client
	worker *worker.Worker
	queue  string
	ledger *Ledger
	events *eventLog
}

type eventLog struct {
	mu     sync.Mutex
	events []interceptor.Event
}

func (l *eventLog) Observe(_ context.Context, e interceptor.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) count(kind interceptor.EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// workerOptions make Stop wait for the activities still running — a slow
// attempt Temporal gave up on may still be recording its outcome — so that
// nothing logs to a test that has ended, and no store is closed under an
// activity.
var workerOptions = sdkworker.Options{WorkerStopTimeout: 30 * time.Second}

func newEnv(t *testing.T, st store.Store, opts interceptor.Options) *env {
	t.Helper()
	return newEnvOn(t, server, st, opts)
}

// newEnvOn is newEnv on srv instead of the shared server.
func newEnvOn(t *testing.T, srv *temporaltest.TestServer, st store.Store, opts interceptor.Options) *env {
	t.Helper()
	logger := zaptest.NewLogger(t)
	c := newClient(srv, worker.ClientOptions(client.Options{}, logger))
	queue := testenv.UniqueName("tq")
	events := &eventLog{}
	opts.Store = st
	opts.Observer = events
	w, err := worker.New(c, queue, worker.Options{Worker: workerOptions, Idempotency: opts, Logger: logger})
	require.NoError(t, err)
	e := &env{t: t, client: c, worker: w, queue: queue, ledger: newLedger(), events: events}
	return e
}

func (e *env) start() {
	e.t.Helper()
	require.NoError(e.t, e.worker.Start())
	e.t.Cleanup(e.worker.Stop)
}

// execute runs wf to completion under tenant and decodes its result.
func (e *env) execute(tenant string, wf any, result any, args ...any) error {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx = interceptor.WithTenant(ctx, tenant)
	run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        testenv.UniqueName("wf"),
		TaskQueue: e.queue,
	}, wf, args...)
	require.NoError(e.t, err)
	return run.Get(ctx, result)
}

// activityOptions are the workflow-side options of most scenarios: a retry
// policy generous enough that only the library can explain a single attempt.
func activityOptions(ctx workflow.Context, startToClose time.Duration, retryInterval time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: startToClose,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    retryInterval,
			BackoffCoefficient: 1,
			MaximumAttempts:    5,
		},
	})
}

func requireIndeterminate(t *testing.T, err error, reason activity.Reason) activity.IndeterminateOutcome {
	t.Helper()
	require.Error(t, err)
	o, ok := activity.AsIndeterminate(err)
	require.Truef(t, ok, "want the indeterminate error, got %v", err)
	require.Equal(t, reason, o.Reason, "reason of %v", err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.True(t, appErr.NonRetryable(), "the indeterminate error must be non-retryable")
	return o
}

// requireNoTenant asserts err is the non-retryable no-tenant error, not an
// indeterminate outcome.
func requireNoTenant(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.Truef(t, errors.As(err, &appErr), "want an application error, got %v", err)
	require.Equal(t, decision.ErrorTypeNoTenant, appErr.Type(), "%v", err)
	require.True(t, appErr.NonRetryable())
	_, indeterminate := activity.AsIndeterminate(err)
	require.False(t, indeterminate, "no tenant is a configuration error, not an outcome a person decides")
	return appErr
}
