package worker

import (
	"context"
	"slices"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tesserix/idempotency/interceptor"
)

// converterPluginName names the client plugin [ClientOptions] installs.
const converterPluginName = "tesserix.idempotency.ClientDataConverter"

// converterPlugin hands a client's data converter to the idempotency
// dispatcher of every worker built on that client: the SDK gives no other
// way to read a client's converter, but applies a client plugin that is also
// a worker plugin to the workers built on the client.
//
// [ClientOptions] installs an unbound one. When a client is built, its
// ConfigureClient puts a bound copy in its place, so options reused for two
// clients never share a converter; the bound copy's NewClient reads the
// converter the client ends up with, after every plugin configured it; its
// ConfigureWorker puts that converter in every activity's context
// ([interceptor.WithDataConverter]) ahead of the worker's interceptors.
type converterPlugin struct {
	//lint:ignore U1000 every method is overridden, but the SDK requires the embedding
	clientPluginBase
	workerPluginBase

	bound bool
	dc    converter.DataConverter
}

// Both SDK plugin bases are named PluginBase; aliases let one type embed
// them both.
type (
	//lint:ignore U1000 see converterPlugin
	clientPluginBase = client.PluginBase
	workerPluginBase = sdkworker.PluginBase
)

var (
	_ client.Plugin    = (*converterPlugin)(nil)
	_ sdkworker.Plugin = (*converterPlugin)(nil)
)

func (*converterPlugin) Name() string { return converterPluginName }

func (p *converterPlugin) ConfigureClient(_ context.Context, o client.PluginConfigureClientOptions) error {
	if p.bound {
		return nil
	}
	plugins := slices.Clone(o.ClientOptions.Plugins)
	for i, q := range plugins {
		if q == client.Plugin(p) {
			plugins[i] = &converterPlugin{bound: true}
		}
	}
	o.ClientOptions.Plugins = plugins
	return nil
}

func (p *converterPlugin) NewClient(
	ctx context.Context,
	o client.PluginNewClientOptions,
	next func(context.Context, client.PluginNewClientOptions) error,
) error {
	if p.bound {
		p.dc = o.ClientOptions.DataConverter
	}
	return next(ctx, o)
}

func (p *converterPlugin) ConfigureWorker(_ context.Context, o sdkworker.PluginConfigureWorkerOptions) error {
	if !p.bound || p.dc == nil {
		// No converter of its own: the dispatcher's default is the client's.
		return nil
	}
	o.WorkerOptions.Interceptors = append([]sdkinterceptor.WorkerInterceptor{&converterCarrier{dc: p.dc}},
		o.WorkerOptions.Interceptors...)
	return nil
}

func isConverterPlugin(p client.Plugin) bool {
	_, ok := p.(*converterPlugin)
	return ok
}

// converterCarrier puts the client's converter in every activity's context.
type converterCarrier struct {
	sdkinterceptor.WorkerInterceptorBase
	dc converter.DataConverter
}

func (c *converterCarrier) InterceptActivity(
	_ context.Context,
	next sdkinterceptor.ActivityInboundInterceptor,
) sdkinterceptor.ActivityInboundInterceptor {
	a := &carrierInbound{dc: c.dc}
	a.Next = next
	return a
}

type carrierInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	dc converter.DataConverter
}

func (a *carrierInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	return a.Next.ExecuteActivity(interceptor.WithDataConverter(ctx, a.dc), in)
}
