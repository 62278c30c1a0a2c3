package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// gaugeHandler is a client.MetricsHandler that remembers the last value of
// each gauge, by name and activity_type tag.
type gaugeHandler struct {
	client.MetricsHandler // the SDK's no-op handler, for the counters and timers
	tags                  map[string]string
	mu                    *sync.Mutex
	last                  map[string]float64
}

func (h *gaugeHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := map[string]string{}
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return &gaugeHandler{MetricsHandler: client.MetricsNopHandler, tags: merged, mu: h.mu, last: h.last}
}

func (h *gaugeHandler) Gauge(name string) client.MetricsGauge {
	id := name + "/" + h.tags["activity_type"]
	return gaugeFunc(func(v float64) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.last[id] = v
	})
}

func (h *gaugeHandler) value(id string) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.last[id]
	return v, ok
}

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

// The running worker exports the backlog — indeterminate and stale records
// per activity type, never per key or tenant — through the metrics handler,
// on the sweeper's schedule, and reports a drained backlog as zero.
func TestWorkerExportsTheBacklogGauge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	origin := store.Origin{WorkflowID: "wf", RunID: "run", ActivityType: "Book", ActivityID: "1", Attempt: 1}
	var tokens []int64
	for _, tenant := range []string{"acme", "globex"} {
		res, err := mem.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: "k", Holder: "gone", Lease: time.Minute, Origin: origin})
		require.NoError(t, err)
		require.NoError(t, mem.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: "k", Token: res.Record.Token, Reason: "r"}))
		tokens = append(tokens, res.Record.Token)
	}
	stale := origin
	stale.ActivityType = "Charge"
	_, err = mem.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "held", Holder: "gone", Lease: time.Millisecond, Origin: stale})
	require.NoError(t, err)

	gauges := &gaugeHandler{MetricsHandler: client.MetricsNopHandler, mu: &sync.Mutex{}, last: map[string]float64{}}
	logger := zaptest.NewLogger(t)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	w, err := worker.New(c, testenv.UniqueName("tq"), worker.Options{
		Worker:         workerOptions,
		Idempotency:    interceptor.Options{Store: mem},
		Logger:         logger,
		SweepInterval:  50 * time.Millisecond,
		MetricsHandler: gauges,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	want := func(id string, v float64) func() bool {
		return func() bool { got, ok := gauges.value(id); return ok && got == v }
	}
	require.Eventually(t, want(metricname.BacklogIndeterminate+"/Book", 2), 10*time.Second, 20*time.Millisecond,
		"two indeterminate Book records, across tenants")
	require.Eventually(t, want(metricname.BacklogStale+"/Charge", 1), 10*time.Second, 20*time.Millisecond,
		"one Charge record whose holder is gone")

	for i, tenant := range []string{"acme", "globex"} {
		require.NoError(t, mem.Resolve(ctx, store.ResolveParams{Tenant: tenant, Key: "k", Decision: store.ActionFree, Token: tokens[i]}))
	}
	require.Eventually(t, want(metricname.BacklogIndeterminate+"/Book", 0), 10*time.Second, 20*time.Millisecond,
		"a drained backlog reads zero")
}

// The plugin exports the gauges through the MetricsHandler of the client it
// is installed on when its options name none: a client that exports metrics
// (as the quick start's worker does with -metrics) exports the backlog too.
func TestPluginExportsTheBacklogThroughTheClientsHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	origin := store.Origin{WorkflowID: "wf", RunID: "run", ActivityType: "Book", ActivityID: "1", Attempt: 1}
	res, err := mem.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "k", Holder: "gone", Lease: time.Minute, Origin: origin})
	require.NoError(t, err)
	require.NoError(t, mem.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "acme", Key: "k", Token: res.Record.Token, Reason: "r"}))

	gauges := &gaugeHandler{MetricsHandler: client.MetricsNopHandler, mu: &sync.Mutex{}, last: map[string]float64{}}
	p, err := worker.NewPlugin(worker.PluginOptions{
		Idempotency:   interceptor.Options{Store: mem},
		Logger:        zaptest.NewLogger(t),
		SweepInterval: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	c := newClient(server, client.Options{MetricsHandler: gauges, Plugins: []client.Plugin{p}})
	w := sdkworker.New(c, testenv.UniqueName("tq"), workerOptions)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	require.Eventually(t, func() bool {
		got, ok := gauges.value(metricname.BacklogIndeterminate + "/Book")
		return ok && got == 1
	},
		10*time.Second, 20*time.Millisecond, "the indeterminate Book record, through the client's handler")
}
