package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"google.golang.org/grpc"

	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// workflowCounter asks a namespace to count its workflows: the question the
// start check asks. A client built by the SDK answers it for its own
// namespace; a connection captured by the plugin, for the namespace its
// client was built with.
type workflowCounter func(ctx context.Context, query string) error

// clientCounter asks through c, which fills in its own namespace.
func clientCounter(c client.Client) workflowCounter {
	return func(ctx context.Context, query string) error {
		_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		return err
	}
}

// clientRef is what the plugin learns of one client whose options carry it:
// the namespace the client was built for, and the connection its calls go
// through. The SDK hands a client plugin the client's options but never the
// client itself (ClientPlugin.NewClient "intentionally does not allow
// control over the actual client instance"), so the plugin adds, in
// ConfigureClient, a gRPC interceptor to the client's dial options that
// notes the connection of the first call the client makes (the SDK's dial
// asks the server for its capabilities at once), and a client interceptor
// of no behaviour of its own that NewClient finds to read the namespace and
// the existing client of client.NewClientFromExisting. Calls made on the
// noted connection go through every interceptor the SDK dialled it with
// (headers, credentials, retries), as the client's own do.
type clientRef struct {
	sdkinterceptor.ClientInterceptorBase

	owner     *Plugin
	namespace atomic.Pointer[string]
	conn      atomic.Pointer[grpc.ClientConn]
	existing  atomic.Pointer[serviceHolder]
}

// serviceHolder is the part of a client the check asks through.
type serviceHolder interface {
	WorkflowService() workflowservice.WorkflowServiceClient
}

var _ sdkinterceptor.ClientInterceptor = (*clientRef)(nil)

// capture is the gRPC unary interceptor that notes the client's connection.
func (r *clientRef) capture(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if cc != nil && r.conn.Load() == nil {
		r.conn.CompareAndSwap(nil, cc)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// counter returns how to ask the client's namespace, or nil when the client
// has made no call yet (a lazy client) and so nothing can be asked.
func (r *clientRef) counter() (workflowCounter, string) {
	ns := r.namespace.Load()
	if ns == nil {
		return nil, ""
	}
	var svc workflowservice.WorkflowServiceClient
	switch {
	case r.conn.Load() != nil:
		svc = workflowservice.NewWorkflowServiceClient(r.conn.Load())
	case r.existing.Load() != nil:
		svc = (*r.existing.Load()).WorkflowService()
	default:
		return nil, ""
	}
	namespace := *ns
	return func(ctx context.Context, query string) error {
		_, err := svc.CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: query})
		return err
	}, namespace
}

// askSearchAttribute asks, through count, whether the namespace knows the
// pending search attribute name: a list query that filters on it is refused
// with InvalidArgument when it does not. A server that cannot be asked
// (unreachable, a visibility store without the query) is not taken for a
// missing attribute: the SDK's Start reports the first, and the second
// cannot hold custom attributes at all. namespace only names it in the
// error ("" for the client's own).
func askSearchAttribute(ctx context.Context, count workflowCounter, name, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, SearchAttributeCheckTimeout)
	defer cancel()
	err := count(ctx, name+" IS NOT NULL")
	var invalid *serviceerror.InvalidArgument
	if errors.As(err, &invalid) && strings.Contains(invalid.Error(), name) {
		return fmt.Errorf("idempotency: the worker does not start: %w", &interceptor.SearchAttributeError{Namespace: namespace, Name: name, Reason: "missing"})
	}
	return nil
}

// checkOnStart is the search-attribute check a worker the plugin configured
// makes when it starts, whichever way it was built: with [New] (the client
// New was given), or with the SDK's worker.New on a client whose options
// carry the plugin (the client noted by ConfigureClient). Where
// [Plugin.CheckSearchAttribute] was called it stands instead. Where the
// plugin knows no client to ask — it is in the worker's options only, or
// in the options of several clients, or its client is lazy and has made no
// call — the worker starts and the check's absence is logged once, saying
// how to have it made.
func (p *Plugin) checkOnStart(ctx context.Context) error {
	name := p.cfg.iopts.PendingSearchAttribute
	if name == "" {
		return nil
	}
	p.mu.Lock()
	checked, count, refs := p.checked, p.count, p.clients
	p.mu.Unlock()
	if checked {
		return nil
	}
	var namespace string
	if count == nil && len(refs) == 1 {
		count, namespace = refs[0].counter()
	}
	if count == nil {
		p.warnUncheckedOnce.Do(func() {
			p.cfg.logger.Warn("idempotency: the namespace was not asked whether it has the pending search attribute: "+
				"the plugin knows no client to ask with; put it in the client's options (client.Options.Plugins), "+
				"build the worker with worker.New, or call Plugin.CheckSearchAttribute before the worker starts; "+
				"without the attribute every waiting workflow's task fails in a loop",
				"search_attribute", name, "clients", len(refs))
		})
		return nil
	}
	return askSearchAttribute(ctx, count, name, namespace)
}

// noteClient records the client New builds the worker on: the start check
// asks through it.
func (p *Plugin) noteClient(c client.Client) {
	p.mu.Lock()
	p.count = clientCounter(c)
	p.mu.Unlock()
}

// newClientRef returns the clientRef ConfigureClient adds to a client's
// options, and remembers it.
func (p *Plugin) newClientRef() *clientRef {
	r := &clientRef{owner: p}
	p.mu.Lock()
	p.clients = append(p.clients, r)
	p.mu.Unlock()
	return r
}

// bindClientRefs gives the plugin's clientRef in the client's final options
// its namespace, and the existing client a client made from one shares its
// connection with.
func (p *Plugin) bindClientRefs(o client.PluginNewClientOptions) {
	for _, i := range o.ClientOptions.Interceptors {
		r, ok := i.(*clientRef)
		if !ok || r.owner != p {
			continue
		}
		ns := cmp.Or(o.ClientOptions.Namespace, client.DefaultNamespace)
		r.namespace.Store(&ns)
		if o.FromExisting != nil {
			var h serviceHolder = o.FromExisting
			r.existing.Store(&h)
		}
	}
}

// StartPingTimeout bounds the ping of the store when a worker starts.
const StartPingTimeout = 10 * time.Second

// pingStore refuses to start a worker whose store does not answer (a
// store.Pinger: the PostgreSQL and Redis stores), with one error naming
// where it looked, rather than start and fail every declared call.
func pingStore(ctx context.Context, st store.Store) error {
	p, ok := st.(store.Pinger)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, StartPingTimeout)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		return fmt.Errorf("idempotency: the worker does not start: its store does not answer: %w", err)
	}
	return nil
}
