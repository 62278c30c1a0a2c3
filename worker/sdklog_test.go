package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// capture is a slog handler that keeps every record.
type capture struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r)
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

// levels returns the level of each record whose message is msg.
func (c *capture) levels(msg string) []slog.Level {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []slog.Level
	for _, r := range c.records {
		if r.Message == msg {
			out = append(out, r.Level)
		}
	}
	return out
}

type chargeRequest struct {
	Order string `json:"order"`
}

func charge(context.Context, chargeRequest) (string, error) { return "ch_1", nil }

// Without a zap logger the events reach the logger the worker already has:
// the SDK's logger of the activity (here the test suite's), at the levels
// the zap observer uses.
func TestSDKLogObserverUsesTheWorkersLogger(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	ic, err := interceptor.New(interceptor.Options{Store: mem, Observer: worker.SDKLogObserver(nil)})
	require.NoError(t, err)
	t.Cleanup(ic.Stop)
	require.NoError(t, ic.Declare(activity.Effectful(charge, "order")))
	logs := &capture{}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(logs)))
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	env.SetContextPropagators([]workflow.ContextPropagator{interceptor.TenantPropagator()})
	p, err := converter.GetDefaultDataConverter().ToPayload("acme")
	require.NoError(t, err)
	env.SetHeader(&commonpb.Header{Fields: map[string]*commonpb.Payload{interceptor.TenantHeader: p}})
	env.RegisterActivity(charge)
	for range 2 {
		_, err := env.ExecuteActivity(charge, chargeRequest{Order: "o-1"})
		require.NoError(t, err)
	}
	assert.Equal(t, []slog.Level{slog.LevelDebug}, logs.levels("idempotency: claimed"))
	assert.Equal(t, []slog.Level{slog.LevelInfo}, logs.levels("idempotency: deduplicated"))
}

// A worker that logs with log/slog gives its logger to Options.Slog and
// its handler sees the events, at the zap observer's levels and with its
// fields, and nothing reaches the SDK's own logger but the SDK's logs.
// Before, the option took zap only.
func TestSlogLoggerSeesTheEvents(t *testing.T) {
	t.Parallel()
	logs := &capture{}
	w, err := worker.New(lazyClient(t), "bookings", worker.Options{
		Slog: slog.New(logs),
		Idempotency: interceptor.Options{Store: memStore(t),
			Tenant: func(context.Context, sdkactivity.Info) (string, bool) { return "acme", true }},
	})
	require.NoError(t, err)
	require.NoError(t, w.Register(activity.Effectful(charge, "order")))
	sdkLogs := &capture{}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(sdkLogs)))
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{w.Interceptor()}})
	env.RegisterActivity(charge)
	for range 2 {
		_, err := env.ExecuteActivity(charge, chargeRequest{Order: "o-1"})
		require.NoError(t, err)
	}
	assert.Equal(t, []slog.Level{slog.LevelDebug}, logs.levels("idempotency: claimed"))
	assert.Equal(t, []slog.Level{slog.LevelInfo}, logs.levels("idempotency: deduplicated"))
	assert.Empty(t, sdkLogs.levels("idempotency: deduplicated"), "the events go to the slog logger, not the SDK's")

	logs.mu.Lock()
	defer logs.mu.Unlock()
	attrs := map[string]string{}
	for _, r := range logs.records {
		if r.Message == "idempotency: deduplicated" {
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		}
	}
	assert.Equal(t, "acme", attrs["tenant"])
	assert.Equal(t, "charge", attrs["activity"])
	assert.Equal(t, "EFFECTFUL", attrs["idempotency_kind"])
	assert.NotEmpty(t, attrs["key"])
}

// The plugin hands a client without a logger of its own the slog logger,
// as it hands it a zap one; one logger only.
func TestPluginSlog(t *testing.T) {
	t.Parallel()
	logs := &capture{}
	p := newPlugin(t, worker.PluginOptions{Slog: slog.New(logs)})
	var opts client.Options
	require.NoError(t, p.ConfigureClient(context.Background(), client.PluginConfigureClientOptions{ClientOptions: &opts}))
	require.NotNil(t, opts.Logger, "the SDK's logs go to the slog logger")
	opts.Logger.Warn("from the SDK", "task_queue", "bookings")
	assert.Equal(t, []slog.Level{slog.LevelWarn}, logs.levels("from the SDK"))

	_, err := worker.NewPlugin(worker.PluginOptions{Idempotency: interceptor.Options{Store: memStore(t)},
		Logger: zap.NewNop(), Slog: slog.New(logs)})
	var oe *interceptor.OptionsError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "worker.PluginOptions.Slog", oe.Field)
	_, err = worker.New(lazyClient(t), "bookings", worker.Options{Idempotency: interceptor.Options{Store: memStore(t)},
		Logger: zap.NewNop(), Slog: slog.New(logs)})
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "worker.Options.Slog", oe.Field)
}

// SlogObserver logs a store outage once per change of state, as the zap
// observer does, and respects the handler's level.
func TestSlogObserverOutagesAndLevel(t *testing.T) {
	t.Parallel()
	logs := &capture{}
	o := worker.SlogObserver(slog.New(logs))
	for _, k := range []interceptor.EventKind{interceptor.EventStoreError, interceptor.EventStoreError,
		interceptor.EventClaimed, interceptor.EventIndeterminate} {
		o.Observe(context.Background(), interceptor.Event{Kind: k, Activity: "charge", Tenant: "acme"})
	}
	assert.Equal(t, []slog.Level{slog.LevelWarn, slog.LevelDebug}, logs.levels("idempotency: store_error"))
	assert.Equal(t, []slog.Level{slog.LevelInfo}, logs.levels("idempotency: store answers again"))
	assert.Equal(t, []slog.Level{slog.LevelError}, logs.levels("idempotency: indeterminate"))

	var buf strings.Builder
	quiet := worker.SlogObserver(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	quiet.Observe(context.Background(), interceptor.Event{Kind: interceptor.EventClaimed})
	assert.Empty(t, buf.String(), "below the handler's level")
	quiet.Observe(context.Background(), interceptor.Event{Kind: interceptor.EventIndeterminate, Reason: activity.ReasonBodyFailed, Key: "v1:k"})
	assert.Contains(t, buf.String(), `level=ERROR msg="idempotency: indeterminate"`)
	assert.Contains(t, buf.String(), "reason=body_failed")
}
