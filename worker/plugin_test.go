package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/optdoc"
	"github.com/tesserix/idempotency/worker"
)

func newPlugin(t *testing.T, opts worker.PluginOptions) *worker.Plugin {
	t.Helper()
	if opts.Idempotency.Store == nil {
		opts.Idempotency.Store = memStore(t)
	}
	p, err := worker.NewPlugin(opts)
	require.NoError(t, err)
	return p
}

func TestNewPluginRefuses(t *testing.T) {
	t.Parallel()
	book := activity.Effectful((&Bookings{}).Book, "flight")
	tests := []struct {
		name  string
		opts  func(t *testing.T) worker.PluginOptions
		field string // the OptionsError's field; empty: a registration error
	}{
		{"NoStore", func(*testing.T) worker.PluginOptions { return worker.PluginOptions{} }, "worker.PluginOptions.Idempotency.Store"},
		{"TinyLease", func(t *testing.T) worker.PluginOptions {
			return worker.PluginOptions{Idempotency: interceptor.Options{Store: memStore(t), Lease: 2}}
		}, "worker.PluginOptions.Idempotency.Lease"},
		{"TinySweepInterval", func(t *testing.T) worker.PluginOptions {
			return worker.PluginOptions{Idempotency: interceptor.Options{Store: memStore(t)}, SweepInterval: time.Nanosecond}
		}, "worker.PluginOptions.SweepInterval"},
		{"DeclaredTwice", func(t *testing.T) worker.PluginOptions {
			return worker.PluginOptions{Idempotency: interceptor.Options{Store: memStore(t)}, Declarations: []*activity.Declaration{book, book}}
		}, ""},
		{"NilDeclaration", func(t *testing.T) worker.PluginOptions {
			return worker.PluginOptions{Idempotency: interceptor.Options{Store: memStore(t)}, Declarations: []*activity.Declaration{nil}}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := worker.NewPlugin(tt.opts(t))
			require.Error(t, err)
			assert.Nil(t, p)
			if tt.field == "" {
				assert.ErrorIs(t, err, worker.ErrRegistration)
				return
			}
			var oe *interceptor.OptionsError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, tt.field, oe.Field)
			assert.ErrorIs(t, err, interceptor.ErrInvalidOptions)
		})
	}
}

// The plugin's client part, applied to options that have some of it
// already, adds each piece once and leaves the caller's slices alone.
func TestPluginConfiguresTheClientOnce(t *testing.T) {
	t.Parallel()
	p := newPlugin(t, worker.PluginOptions{Logger: zap.NewNop()})
	type otherPropagator struct{ workflow.ContextPropagator }
	own := []workflow.ContextPropagator{otherPropagator{}}
	opts := client.Options{ContextPropagators: own}
	for range 2 {
		require.NoError(t, p.ConfigureClient(context.Background(), client.PluginConfigureClientOptions{ClientOptions: &opts}))
	}
	assert.Len(t, opts.ContextPropagators, 2, "the caller's propagator and the tenant's")
	assert.Equal(t, interceptor.TenantPropagator(), opts.ContextPropagators[1])
	assert.Len(t, own, 1, "the caller's slice is not changed")
	assert.Len(t, opts.Interceptors, 2, "one converter carrier, one note of the client for the start check")
	assert.Len(t, opts.ConnectionOptions.DialOptions, 1, "one gRPC interceptor noting the client's connection")
	assert.NotNil(t, opts.Logger, "the SDK's logs go to the plugin's logger")

	kept := discard()
	opts = client.Options{Logger: kept, ContextPropagators: []workflow.ContextPropagator{interceptor.TenantPropagator()}}
	require.NoError(t, p.ConfigureClient(context.Background(), client.PluginConfigureClientOptions{ClientOptions: &opts}))
	assert.Len(t, opts.ContextPropagators, 1)
	assert.Same(t, kept, opts.Logger, "a client's own logger is kept")

	// Options that carry the plugin get no second client part.
	got := worker.ClientOptions(client.Options{Plugins: []client.Plugin{p}}, nil)
	require.Len(t, got.Plugins, 1)
	assert.Same(t, p, got.Plugins[0])
}

// configure runs the plugin's worker part on opts as the SDK's worker.New
// does for the worker with the given instance key.
func configure(p *worker.Plugin, key string, opts *sdkworker.Options) error {
	return p.ConfigureWorker(context.Background(), sdkworker.PluginConfigureWorkerOptions{
		WorkerInstanceKey:     key,
		TaskQueue:             "bookings",
		WorkerOptions:         opts,
		WorkerRegistryOptions: &sdkworker.PluginConfigureWorkerRegistryOptions{},
	})
}

// One plugin met twice by one worker (in the client's options and the
// worker's) installs one dispatcher; a second dispatcher on a worker is
// refused.
func TestPluginConfiguresAWorkerOnce(t *testing.T) {
	t.Parallel()
	p := newPlugin(t, worker.PluginOptions{})
	var opts sdkworker.Options
	require.NoError(t, configure(p, "w1", &opts))
	require.NoError(t, configure(p, "w1", &opts))
	require.Len(t, opts.Interceptors, 1)
	ic, ok := opts.Interceptors[0].(*interceptor.Interceptor)
	require.True(t, ok)

	// Another worker gets a dispatcher of its own.
	var other sdkworker.Options
	require.NoError(t, configure(p, "w2", &other))
	require.Len(t, other.Interceptors, 1)
	assert.NotSame(t, ic, other.Interceptors[0])

	err := configure(newPlugin(t, worker.PluginOptions{}), "w1", &opts)
	assert.ErrorIs(t, err, worker.ErrInstalledTwice, "a second plugin")
	mine := sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}}
	err = configure(newPlugin(t, worker.PluginOptions{}), "w3", &mine)
	assert.ErrorIs(t, err, worker.ErrInstalledTwice, "an interceptor in the worker's options")

	// Only the client part of the plugin, as ClientOptions installs it:
	// nothing on the worker.
	half := worker.ClientPlugin()
	var plain sdkworker.Options
	require.NoError(t, configure(half, "w4", &plain))
	assert.Empty(t, plain.Interceptors)
}

// worker.New is refused where the library is installed already: on a client
// that carries the plugin, or with a dispatcher in the worker's options.
func TestNewRefusesASecondDispatcher(t *testing.T) {
	t.Parallel()
	p := newPlugin(t, worker.PluginOptions{})
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Logger: discard(), Plugins: []client.Plugin{p}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w, err := worker.New(c, "bookings", worker.Options{Idempotency: interceptor.Options{Store: memStore(t)}})
	assert.ErrorIs(t, err, worker.ErrInstalledTwice)
	assert.Nil(t, w)

	ic, err := interceptor.New(interceptor.Options{Store: memStore(t)})
	require.NoError(t, err)
	t.Cleanup(ic.Stop)
	w, err = worker.New(lazyClient(t), "bookings", worker.Options{
		Worker:      sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}},
		Idempotency: interceptor.Options{Store: memStore(t)},
	})
	assert.ErrorIs(t, err, worker.ErrInstalledTwice)
	assert.Nil(t, w)
}

// The plugin gives a replayer the propagator and the workflow side, once.
func TestPluginConfiguresAReplayer(t *testing.T) {
	t.Parallel()
	p := newPlugin(t, worker.PluginOptions{})
	var opts sdkworker.WorkflowReplayerOptions
	for range 2 {
		require.NoError(t, p.ConfigureWorkflowReplayer(context.Background(), sdkworker.PluginConfigureWorkflowReplayerOptions{
			WorkflowReplayerOptions:         &opts,
			WorkflowReplayerRegistryOptions: &sdkworker.PluginConfigureWorkflowReplayerRegistryOptions{},
		}))
	}
	require.Len(t, opts.ContextPropagators, 1)
	assert.Equal(t, interceptor.TenantPropagator(), opts.ContextPropagators[0])
	require.Len(t, opts.Interceptors, 1)
	assert.IsType(t, &interceptor.Interceptor{}, opts.Interceptors[0])
}

// Every default the options state is the value applied.
func TestOptionsDocStatesTheDefaults(t *testing.T) {
	values := map[string]any{"DefaultSweepInterval": worker.DefaultSweepInterval}
	assert.Equal(t, 2, optdoc.Check(t, "worker.go", values)+optdoc.Check(t, "plugin.go", values))
}

// A worker whose options leave WorkerStopTimeout zero gets
// DefaultWorkerStopTimeout, which the log names; one that sets it keeps it.
func TestPluginDefaultsTheStopTimeout(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	p := newPlugin(t, worker.PluginOptions{Logger: zap.New(core)})
	for _, tt := range []struct{ set, want time.Duration }{
		{0, worker.DefaultWorkerStopTimeout},
		{5 * time.Second, 5 * time.Second},
	} {
		wopts := sdkworker.Options{WorkerStopTimeout: tt.set}
		require.NoError(t, p.ConfigureWorker(context.Background(), sdkworker.PluginConfigureWorkerOptions{
			WorkerInstanceKey:     fmt.Sprint("w", tt.set),
			TaskQueue:             "bookings",
			WorkerOptions:         &wopts,
			WorkerRegistryOptions: &sdkworker.PluginConfigureWorkerRegistryOptions{},
		}))
		assert.Equal(t, tt.want, wopts.WorkerStopTimeout)
	}
	entries := logs.FilterMessageSnippet("WorkerStopTimeout").All()
	require.Len(t, entries, 1, "logged for the worker that left it zero only")
	assert.Equal(t, worker.DefaultWorkerStopTimeout, entries[0].ContextMap()["worker_stop_timeout"])
}

// worker.NexusOperation checks the policy when it is built, and needs a
// plugin made by NewPlugin.
func TestNexusOperationRefuses(t *testing.T) {
	t.Parallel()
	handler := func(context.Context, BookRequest, nexus.StartOperationOptions) (string, error) { return "", nil }
	_, err := worker.NexusOperation(worker.ClientPlugin(), "book", activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}}, handler)
	assert.ErrorIs(t, err, interceptor.ErrInvalidOptions)
	p := newPlugin(t, worker.PluginOptions{})
	_, err = worker.NexusOperation(p, "book", activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, Transactional: true}, handler)
	assert.ErrorIs(t, err, interceptor.ErrNexusDeclaration)
	op, err := worker.NexusOperation(p, "book", activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}}, handler)
	require.NoError(t, err)
	assert.Equal(t, "book", op.Name())
}
