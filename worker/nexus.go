package worker

import (
	"context"
	"fmt"
	"sync"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
)

// NexusOperation is interceptor.NexusOperation for the plugin path: a
// synchronous Nexus operation, name, whose handler runs through the
// dispatcher p installed on the worker that receives the request, as an
// activity declared with pol does (see interceptor.NexusOperation for the
// key, the tenant and what is refused). On a worker built with [New],
// interceptor.NexusOperation(w.Interceptor(), ...) is the same.
//
// The SDK's worker.New gives the plugin's dispatcher no handle to the code
// that builds the service, so the operation finds it when a request comes:
// the dispatcher of a started worker p configured on the request's task
// queue (temporalnexus.GetOperationInfo). A request that reaches a worker p
// did not configure fails with a retryable UNAVAILABLE handler error, and
// the handler is not run.
func NexusOperation[I, O any](p *Plugin, name string, pol activity.Policy,
	handler func(ctx context.Context, input I, opts nexus.StartOperationOptions) (O, error)) (nexus.Operation[I, O], error) {
	if p == nil || p.cfg == nil {
		return nil, fmt.Errorf("%w: worker.NexusOperation needs a plugin made by worker.NewPlugin", interceptor.ErrInvalidOptions)
	}
	// The policy is checked now, on a dispatcher of the plugin's options
	// that runs nothing: an operation is built for a worker's own only when
	// a request comes.
	probe, err := interceptor.New(p.cfg.iopts)
	if err != nil {
		return nil, err
	}
	defer probe.Stop()
	if _, err := interceptor.NexusOperation(probe, name, pol, handler); err != nil {
		return nil, err
	}
	var ops sync.Map // *interceptor.Interceptor → nexus.Operation[I, O]
	return nexus.NewSyncOperation(name, func(ctx context.Context, input I, opts nexus.StartOperationOptions) (O, error) {
		var out O
		queue := temporalnexus.GetOperationInfo(ctx).TaskQueue
		ic := p.dispatcherOn(queue)
		if ic == nil {
			return out, nexus.NewHandlerErrorf(nexus.HandlerErrorTypeUnavailable,
				"idempotency: no started worker on task queue %q carries the plugin operation %q was built with", queue, name)
		}
		op, ok := ops.Load(ic)
		if !ok {
			made, err := interceptor.NexusOperation(ic, name, pol, handler)
			if err != nil {
				return out, err
			}
			op, _ = ops.LoadOrStore(ic, made)
		}
		res, err := op.(nexus.Operation[I, O]).Start(ctx, input, opts)
		if err != nil {
			return out, err
		}
		if r, ok := res.(*nexus.HandlerStartOperationResultSync[O]); ok {
			return r.Value, nil
		}
		return out, nexus.NewHandlerErrorf(nexus.HandlerErrorTypeInternal, "idempotency: operation %q answered asynchronously", name)
	}), nil
}

// dispatcherOn returns the dispatcher of a started worker the plugin
// configured on queue, or nil.
func (p *Plugin) dispatcherOn(queue string) *interceptor.Interceptor {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pw := range p.workers {
		if pw.queue == queue && pw.started {
			return pw.ic
		}
	}
	return nil
}
