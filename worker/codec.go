package worker

import (
	"context"
	"sync"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/tesserix/idempotency/internal/clientconv"
)

// converterCarrier hands a client's data converter to the idempotency
// dispatcher of every worker built on that client: the SDK gives no other
// way to read a client's converter. The plugin's ConfigureClient adds one
// to each client it configures, as a client interceptor — the SDK applies a
// client interceptor that is also a worker interceptor to the client's
// workers, ahead of their own interceptors; its NewClient binds it to the
// converter the client ends up with, after every plugin configured it.
// Every activity, and every Nexus operation's handler, then runs with that
// converter in its context ([clientconv.With]).
type converterCarrier struct {
	sdkinterceptor.ClientInterceptorBase
	sdkinterceptor.WorkerInterceptorBase

	once sync.Once
	dc   converter.DataConverter // nil: the client has none of its own
}

var (
	_ sdkinterceptor.ClientInterceptor = (*converterCarrier)(nil)
	_ sdkinterceptor.WorkerInterceptor = (*converterCarrier)(nil)
)

// bind sets the carrier's converter, once.
func (c *converterCarrier) bind(dc converter.DataConverter) {
	c.once.Do(func() { c.dc = dc })
}

func (c *converterCarrier) converter() converter.DataConverter {
	c.once.Do(func() {}) // a carrier never bound carries nothing
	return c.dc
}

func isConverterCarrier(i sdkinterceptor.ClientInterceptor) bool {
	_, ok := i.(*converterCarrier)
	return ok
}

func (c *converterCarrier) InterceptActivity(
	_ context.Context,
	next sdkinterceptor.ActivityInboundInterceptor,
) sdkinterceptor.ActivityInboundInterceptor {
	dc := c.converter()
	if dc == nil {
		// No converter of its own: the dispatcher's default is the client's.
		return next
	}
	a := &carrierInbound{dc: dc}
	a.Next = next
	return a
}

type carrierInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	dc converter.DataConverter
}

func (a *carrierInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	return a.Next.ExecuteActivity(clientconv.With(ctx, a.dc), in)
}

func (c *converterCarrier) InterceptNexusOperation(
	_ context.Context,
	next sdkinterceptor.NexusOperationInboundInterceptor,
) sdkinterceptor.NexusOperationInboundInterceptor {
	dc := c.converter()
	if dc == nil {
		return next
	}
	n := &carrierNexus{dc: dc}
	n.Next = next
	return n
}

// carrierNexus hands the client's converter to a Nexus operation's handler,
// so that interceptor.NexusOperation records its outcomes as an activity's
// are recorded.
type carrierNexus struct {
	sdkinterceptor.NexusOperationInboundInterceptorBase
	dc converter.DataConverter
}

var _ sdkinterceptor.NexusOperationInboundInterceptor = (*carrierNexus)(nil)

func (n *carrierNexus) StartOperation(ctx context.Context, in sdkinterceptor.NexusStartOperationInput) (nexus.HandlerStartOperationResult[any], error) {
	return n.Next.StartOperation(clientconv.With(ctx, n.dc), in)
}
