package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// pluginSetup is a client built with the SDK's client.Dial and a worker
// built with the SDK's worker.New, the library installed by one plugin.
type pluginSetup struct {
	// onClient puts the plugin in the client's options, onWorker in the
	// worker's; at least one.
	onClient, onWorker bool
	// opts configure the dispatcher; the store and observer are set.
	opts interceptor.Options
}

// newPluginEnv builds the setup against the in-process server with an
// encrypting codec on the client. The plugin registers Book (declared
// EFFECTFUL on "flight") and the Resolve activity when the worker starts.
func newPluginEnv(t *testing.T, st store.Store, a *airline, s pluginSetup) (*env, converter.DataConverter) {
	t.Helper()
	logger := zaptest.NewLogger(t)
	events := &eventLog{}
	e := &env{t: t, queue: testenv.UniqueName("tq"), ledger: newLedger(), events: events}
	a.ledger = e.ledger
	opts := s.opts
	opts.Store, opts.Observer = st, events
	p, err := worker.NewPlugin(worker.PluginOptions{
		Idempotency:  opts,
		Declarations: []*activity.Declaration{activity.Effectful(a.Book, "flight")},
		Logger:       logger,
	})
	require.NoError(t, err)

	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), newEncryptingCodec(t))
	copts := client.Options{
		HostPort:      server.GetFrontendHostPort(),
		Namespace:     server.GetDefaultNamespace(),
		DataConverter: dc,
		Logger:        worker.NewLogger(logger),
	}
	if s.onClient {
		copts.Plugins = []client.Plugin{p}
	}
	c, err := client.Dial(copts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	e.client = c

	wopts := workerOptions
	if s.onWorker {
		wopts.Plugins = []sdkworker.Plugin{p}
	}
	w := sdkworker.New(c, e.queue, wopts)
	w.RegisterWorkflow(TwoBookings)
	w.RegisterWorkflow(OneBooking)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return e, dc
}

// requireEncryptedRecord checks the store keeps key's outcome as the
// client's codec made it, and returns the decoded result.
func requireEncryptedRecord(t *testing.T, st store.Store, dc converter.DataConverter, tenant, key string) string {
	t.Helper()
	rec, err := st.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: key})
	require.NoError(t, err)
	require.Equal(t, store.StateCompleted, rec.State)
	var stored commonpb.Payloads
	require.NoError(t, proto.Unmarshal(rec.Outcome, &stored))
	require.Len(t, stored.Payloads, 1)
	assert.Equal(t, encryptedEncoding, string(stored.Payloads[0].Metadata[converter.MetadataEncoding]),
		"the record went through the client's codec")
	assert.NotContains(t, string(rec.Outcome), "seat")
	var got string
	require.NoError(t, dc.FromPayloads(&stored, &got))
	return got
}

// One plugin in the options of a client built with the SDK's client.Dial,
// and a worker built with the SDK's worker.New on it: the booking asked for
// twice books once, under the tenant the starter's context carried, and
// the store holds the outcome as the client's codec made it.
func TestPluginOnTheClient(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		for _, s := range []struct {
			name  string
			setup pluginSetup
		}{
			{"client", pluginSetup{onClient: true}},
			{"client and worker", pluginSetup{onClient: true, onWorker: true}},
		} {
			t.Run(s.name, func(t *testing.T) {
				e, dc := newPluginEnv(t, st, &airline{hold: 300 * time.Millisecond}, s.setup)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				tenant := testenv.UniqueName("tenant")
				run, err := e.client.ExecuteWorkflow(interceptor.WithTenant(ctx, tenant), client.StartWorkflowOptions{
					ID: testenv.UniqueName("wf"), TaskQueue: e.queue,
				}, TwoBookings, "BA117")
				require.NoError(t, err)
				var results []string
				require.NoError(t, run.Get(ctx, &results))
				require.Len(t, results, 2)
				assert.Equal(t, results[0], results[1], "the duplicate gets the first caller's answer")
				assert.Equal(t, 1, e.ledger.Effects("BA117"), "one seat")
				assert.Equal(t, 1, e.ledger.Calls("BA117"))
				requireNoPlaintextInHistory(t, e.client, run, "seat", "BA117")

				key := completedKey(t, e.events)
				assert.Equal(t, results[0], requireEncryptedRecord(t, st, dc, tenant, key), "recorded under the header's tenant")
			})
		}
	})
}

// The decision path through the plugin: a booking whose answer was lost
// waits for a person (AwaitDecision), the Update decision is recorded by
// the Resolve activity the plugin registered, with the client's codec, and
// the call returns it; nothing is booked.
func TestPluginDecisionThroughResolve(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e, dc := newPluginEnv(t, st, &airline{failures: 1}, pluginSetup{onClient: true,
			opts: interceptor.Options{Lease: 2 * time.Second, AwaitDecision: true}})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
		assert.Equal(t, "acme", o.Tenant)
		result, err := json.Marshal("seat 4 on BA117, confirmed by phone")
		require.NoError(t, err)
		res, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionComplete, Result: result, By: "ops@acme"})
		require.NoError(t, err)
		assert.Equal(t, decision.AppliedRecorded, res.Applied)
		var got string
		require.NoError(t, run.Get(ctx, &got))
		assert.Equal(t, "seat 4 on BA117, confirmed by phone", got)
		assert.Equal(t, 1, e.ledger.Calls("BA117"))
		assert.Zero(t, e.ledger.Effects("BA117"))
		assert.Equal(t, got, requireEncryptedRecord(t, st, dc, "acme", o.Key))
	})
}

// The plugin in the worker's options only: the worker gets the dispatcher,
// the declaration and the Resolve activity; the tenant travels because the
// client carries the propagator by other means (worker.ClientOptions here).
func TestPluginOnTheWorkerOnly(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	logger := zaptest.NewLogger(t)
	a := &airline{ledger: newLedger(), hold: 300 * time.Millisecond}
	events := &eventLog{}
	p, err := worker.NewPlugin(worker.PluginOptions{
		Idempotency:  interceptor.Options{Store: mem, Observer: events},
		Declarations: []*activity.Declaration{activity.Effectful(a.Book, "flight")},
		Logger:       logger,
	})
	require.NoError(t, err)
	c := newClient(server, worker.ClientOptions(client.Options{}, logger))
	queue := testenv.UniqueName("tq")
	wopts := workerOptions
	wopts.Plugins = []sdkworker.Plugin{p}
	w := sdkworker.New(c, queue, wopts)
	w.RegisterWorkflow(TwoBookings)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	e := &env{t: t, client: c, queue: queue, ledger: a.ledger, events: events}
	var results []string
	require.NoError(t, e.execute("acme", TwoBookings, &results, "BA117"))
	assert.Equal(t, results[0], results[1])
	assert.Equal(t, 1, a.ledger.Effects("BA117"))
}

// A worker that registers the declared activity itself keeps its own
// registration, and the plugin's declaration applies to it.
func TestPluginKeepsTheWorkersOwnRegistration(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	logger := zaptest.NewLogger(t)
	a := &airline{ledger: newLedger(), hold: 300 * time.Millisecond}
	events := &eventLog{}
	p, err := worker.NewPlugin(worker.PluginOptions{
		Idempotency:  interceptor.Options{Store: mem, Observer: events},
		Declarations: []*activity.Declaration{activity.Effectful(a.Book, "flight")},
		Logger:       logger,
	})
	require.NoError(t, err)
	c := newClient(server, client.Options{Plugins: []client.Plugin{p}})
	queue := testenv.UniqueName("tq")
	w := sdkworker.New(c, queue, workerOptions)
	w.RegisterActivity(a.Book) // as "Book", the declaration's name
	resolver, err := interceptor.New(interceptor.Options{Store: mem})
	require.NoError(t, err)
	w.RegisterActivityWithOptions(resolver.ResolveActivity(), sdkactivity.RegisterOptions{Name: decision.ResolveActivityName})
	w.RegisterWorkflow(TwoBookings)
	require.NoError(t, w.Start(), "no activity is registered twice")
	t.Cleanup(w.Stop)
	e := &env{t: t, client: c, queue: queue, ledger: a.ledger, events: events}
	var results []string
	require.NoError(t, e.execute("acme", TwoBookings, &results, "BA117"))
	assert.Equal(t, 1, a.ledger.Effects("BA117"))
	assert.Equal(t, 1, events.count(interceptor.EventDeduplicated))
}

// worker.New on a client that carries the plugin would install the library
// twice: it is refused, naming the way out.
func TestPluginAndNewRefused(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	p, err := worker.NewPlugin(worker.PluginOptions{Idempotency: interceptor.Options{Store: mem}})
	require.NoError(t, err)
	c := newClient(server, client.Options{Plugins: []client.Plugin{p}})
	w, err := worker.New(c, testenv.UniqueName("tq"), worker.Options{Idempotency: interceptor.Options{Store: mem}})
	require.ErrorIs(t, err, worker.ErrInstalledTwice)
	assert.Nil(t, w)
	assert.True(t, strings.Contains(err.Error(), "install the library once"), err.Error())
}

// Every committed history replays on a replayer given the plugin alone, in
// every configuration: it installs the propagator and the workflow side as
// a worker gets them.
func TestReplayHistoriesThroughThePlugin(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no committed histories under %s", historiesDir)
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	for _, cfg := range replayConfigs {
		opts := cfg.opts
		opts.Store = st
		popts := worker.PluginOptions{Idempotency: opts}
		if cfg.declare {
			popts.Declarations = replayDeclarations()
		}
		p, err := worker.NewPlugin(popts)
		require.NoError(t, err)
		for _, file := range files {
			t.Run(filepath.Base(file)+"/"+cfg.name, func(t *testing.T) {
				r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
					Plugins: []sdkworker.Plugin{p},
				})
				require.NoError(t, err)
				registerRecordedWorkflows(r)
				err = r.ReplayWorkflowHistoryFromJSONFile(nil, file)
				if why, ok := unreplayableUnder(file, cfg.name); ok {
					require.Error(t, err, "listed as unreplayable, yet it replays: take it off the list")
					t.Skip(why)
				}
				require.NoError(t, err)
			})
		}
	}
}

// A Nexus handler on the README's plugin path (the plugin in the client's
// options, the worker built with the SDK's worker.New): built with
// worker.NexusOperation from the plugin, it runs through the dispatcher the
// plugin installed on the worker, so a start whose answer was lost is
// answered from the record: one booking, under the handler's tenant (its
// namespace, Options.NexusTenant being nil), not the caller's. (Before, the plugin path had no dispatcher to build a declared
// handler on: interceptor.NexusOperation needs worker.New's w.Interceptor().)
func TestPluginNexusOperationBooksOnce(t *testing.T) {
	t.Parallel()
	srv := newNexusServer(t)
	forEachStore(t, func(t *testing.T, st store.Store) {
		events := &eventLog{}
		p, err := worker.NewPlugin(worker.PluginOptions{
			Idempotency: interceptor.Options{Store: st, Observer: events, Lease: 2 * time.Second},
			Logger:      zaptest.NewLogger(t),
		})
		require.NoError(t, err)
		c := newClient(srv, client.Options{Plugins: []client.Plugin{p}})
		t.Cleanup(c.Close)
		queue := testenv.UniqueName("tq")
		endpoint := createEndpoint(t, srv, c, queue)
		a := &nexusAirline{bookings: map[string]int{}}
		op, err := worker.NexusOperation(p, "book-seat",
			activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight", "seat"}}, a.book)
		require.NoError(t, err)
		svc := nexus.NewService("seats")
		require.NoError(t, svc.Register(op))
		w := sdkworker.New(c, queue, workerOptions)
		w.RegisterNexusService(svc)
		w.RegisterWorkflow(NexusBooking)
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run, err := c.ExecuteWorkflow(interceptor.WithTenant(ctx, "acme"), client.StartWorkflowOptions{
			ID: testenv.UniqueName("wf"), TaskQueue: queue,
		}, NexusBooking, endpoint, "seats", NexusSeatRequest{Flight: "BA117", Seat: "12A"})
		require.NoError(t, err)
		var got string
		require.NoError(t, run.Get(ctx, &got))
		assert.Equal(t, 1, a.booked("BA117"), "one booking, though the operation started twice")
		assert.Equal(t, "seat 12A on BA117, booking 1", got, "the caller gets the first booking's answer, from its record")
		claimed := 0
		for _, ev := range events.all() {
			if ev.Kind == interceptor.EventClaimed {
				claimed++
				assert.Equal(t, srv.GetDefaultNamespace(), ev.Tenant, "the handler's tenant, not the caller's acme")
			}
		}
		assert.Equal(t, 1, claimed, "the handler ran through the plugin's dispatcher")
	})
}
