package worker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
)

// Options made once by ClientOptions and used for two clients give each
// client's workers that client's own converter, the one it ends up with
// after every plugin configured it; the caller's options are not changed.
func TestConverterCarrierBindsPerClient(t *testing.T) {
	t.Parallel()
	opts := ClientOptions(client.Options{}, nil)
	require.Len(t, opts.Plugins, 1)
	plugin := opts.Plugins[0]

	build := func(dc converter.DataConverter) *converterCarrier {
		o := opts // what the SDK does with the options of one client
		require.NoError(t, plugin.ConfigureClient(context.Background(), client.PluginConfigureClientOptions{ClientOptions: &o}))
		require.Len(t, o.Interceptors, 1)
		carrier, ok := o.Interceptors[0].(*converterCarrier)
		require.True(t, ok)
		require.NoError(t, plugin.ConfigureClient(context.Background(), client.PluginConfigureClientOptions{ClientOptions: &o}))
		require.Len(t, o.Interceptors, 1, "configured twice, one carrier")
		o.DataConverter = dc // a later plugin may still change it
		called := false
		require.NoError(t, plugin.NewClient(context.Background(), client.PluginNewClientOptions{ClientOptions: o},
			func(context.Context, client.PluginNewClientOptions) error { called = true; return nil }))
		require.True(t, called)
		return carrier
	}
	a := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), converter.NewZlibCodec(converter.ZlibCodecOptions{}))
	b := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true}))
	ca, cb := build(a), build(b)
	require.NotSame(t, ca, cb, "each client gets a carrier of its own")
	assert.Same(t, a, ca.converter())
	assert.Same(t, b, cb.converter())
	assert.Empty(t, opts.Interceptors, "the caller's options are not changed")

	next := &sdkinterceptor.ActivityInboundInterceptorBase{}
	in, ok := ca.InterceptActivity(context.Background(), next).(*carrierInbound)
	require.True(t, ok, "the carrier wraps the activity")
	assert.Same(t, a, in.dc)

	// A client without a converter of its own: nothing to carry.
	cn := build(nil)
	assert.Same(t, next, cn.InterceptActivity(context.Background(), next))
}
