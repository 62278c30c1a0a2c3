package worker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
)

// Options made once by ClientOptions and used for two clients give each
// client's workers that client's own converter, the one it ends up with
// after every plugin configured it.
func TestConverterPluginBindsPerClient(t *testing.T) {
	t.Parallel()
	opts := ClientOptions(client.Options{}, nil)
	require.Len(t, opts.Plugins, 1)
	template := opts.Plugins[0]

	build := func(dc converter.DataConverter) *converterPlugin {
		o := opts // what the SDK does with the options of one client
		require.NoError(t, template.ConfigureClient(context.Background(), client.PluginConfigureClientOptions{ClientOptions: &o}))
		require.Len(t, o.Plugins, 1)
		bound, ok := o.Plugins[0].(*converterPlugin)
		require.True(t, ok)
		require.NotSame(t, template, bound, "each client gets a plugin of its own")
		o.DataConverter = dc // a later plugin may still change it
		called := false
		require.NoError(t, bound.NewClient(context.Background(), client.PluginNewClientOptions{ClientOptions: o},
			func(context.Context, client.PluginNewClientOptions) error { called = true; return nil }))
		require.True(t, called)
		return bound
	}
	a := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), converter.NewZlibCodec(converter.ZlibCodecOptions{}))
	b := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true}))
	pa, pb := build(a), build(b)
	assert.Same(t, a, pa.dc)
	assert.Same(t, b, pb.dc)
	assert.Len(t, opts.Plugins, 1, "the caller's options are not changed")
	assert.Same(t, template, opts.Plugins[0])

	var wo sdkworker.Options
	require.NoError(t, pa.ConfigureWorker(context.Background(), sdkworker.PluginConfigureWorkerOptions{WorkerOptions: &wo}))
	require.Len(t, wo.Interceptors, 1)
	carrier, ok := wo.Interceptors[0].(*converterCarrier)
	require.True(t, ok, "the carrier goes ahead of the worker's interceptors")
	assert.Same(t, a, carrier.dc)

	// A client without a converter of its own: nothing to carry.
	pn := build(nil)
	wo = sdkworker.Options{}
	require.NoError(t, pn.ConfigureWorker(context.Background(), sdkworker.PluginConfigureWorkerOptions{WorkerOptions: &wo}))
	assert.Empty(t, wo.Interceptors)
}
