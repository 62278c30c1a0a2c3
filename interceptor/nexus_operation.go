package interceptor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"

	"github.com/nexus-rpc/sdk-go/nexus"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
)

// ErrNexusDeclaration is matched by the error [NexusOperation] returns for a
// policy a Nexus operation cannot be declared with (and by
// activity.ErrInvalidDeclaration).
var ErrNexusDeclaration = fmt.Errorf("%w: not for a Nexus operation", activity.ErrInvalidDeclaration)

// NexusOperation returns a synchronous Nexus operation, name, whose handler
// runs through ic's dispatcher as an activity declared with p does: its
// call is claimed under a key, a duplicate — a caller's retry of the same
// start request, a request whose answer was lost — gets the recorded
// answer, a concurrent duplicate waits for the first, and an EFFECTFUL
// handler's outcome nobody can state fails the call with the non-retryable
// indeterminate error ([activity.AsIndeterminate] reads it in the calling
// workflow, through the Nexus operation error). Register it in a
// nexus.Service on a worker that has ic.
//
// The key is derived from the tenant, the operation's name (p.Name is set
// to it) and a scope:
//
//   - with p.OncePerRun, the start request's ID ([nexus.StartOperationOptions]
//     RequestID), which the caller's every attempt of one operation
//     carries: one effect per operation the caller schedules;
//   - with key arguments (fields of the input), the handler's namespace
//     and service: one effect per value of those fields, whichever caller
//     and request it comes in.
//
// The endpoint is not part of the scope: two endpoints that reach one
// handler under one tenant reach one effect. The tenant is the handler's
// decision, never the caller's: Options.NexusTenant resolves it from what
// the handler's worker knows of the request ([NexusRequest]), and by
// default it is Options.DefaultTenant, else the handler's namespace. The
// caller's [TenantHeader] header counts only where NexusTenant says so
// ([NexusTenantFromHeader], for endpoints the handler trusts); Options.Tenant,
// which reads an activity's headers, is not asked. A key never spans
// tenants: the tenant is part of its derivation and of the record's
// address. With Options.KeySecret the key is derived under the worker's
// secret, and a request that finds no record under it looks for one under
// the other derivations the worker holds (see Options.KeySecret).
//
// Outcomes are recorded with the converter activities' outcomes are
// (Options.DataConverter, else the client's when it carries the worker
// package's plugin), so a payload codec covers them at rest. A recorded
// result is decoded into O with the SDK's default payload converters,
// after that converter has undone its codecs. The record names the
// operation and the request ID as its origin, and no workflow: no
// workflow's Resolve or Probe activity may touch it. A READ_ONLY policy
// runs handler as it is. Transactional and probed policies are refused
// ([ErrNexusDeclaration]): a Nexus handler has no transaction of the
// store's, and nothing waits on the handler's side for a person. An
// unknown outcome goes to the caller with the tenant and key, and a person
// settles the handler's record in its store (idempotencyctl resolve;
// docs/GUIDE.md, "Nexus operations").
func NexusOperation[I, O any](ic *Interceptor, name string, p activity.Policy,
	handler func(ctx context.Context, input I, opts nexus.StartOperationOptions) (O, error)) (nexus.Operation[I, O], error) {
	p.Name = name
	switch {
	case p.Transactional:
		return nil, fmt.Errorf("%w: operation %q declares Transactional", ErrNexusDeclaration, name)
	case p.Probe != nil:
		return nil, fmt.Errorf("%w: operation %q declares a Probe", ErrNexusDeclaration, name)
	}
	decl, err := activity.Declare(handlerOf(handler), p)
	if err != nil {
		return nil, err
	}
	body := func(ctx context.Context, args ...any) (any, error) {
		call := ctx.Value(nexusCallKey{}).(*nexusCall)
		return handler(ctx, args[0].(I), call.opts)
	}
	if !decl.Kind().Deduplicated() {
		return nexus.NewSyncOperation(name, handler), nil
	}
	return nexus.NewSyncOperation(name, func(ctx context.Context, input I, opts nexus.StartOperationOptions) (O, error) {
		var out O
		call := &nexusCall{opts: opts, perRequest: p.OncePerRun}
		res, err := ic.runNexus(ctx, decl, call, input, body)
		if err != nil || res == nil {
			return out, err
		}
		switch v := res.(type) {
		case O:
			return v, nil
		case converter.RawValue:
			// A recorded answer.
			if err := converter.GetDefaultDataConverter().FromPayload(v.Payload(), &out); err != nil {
				return out, fmt.Errorf("idempotency: the recorded result of Nexus operation %q: %w", name, err)
			}
			return out, nil
		}
		return out, fmt.Errorf("idempotency: Nexus operation %q answered a %T", name, res)
	}), nil
}

// handlerOf is the function a Nexus operation is declared with: its
// arguments name the key arguments, as an activity's do.
func handlerOf[I, O any](handler func(context.Context, I, nexus.StartOperationOptions) (O, error)) func(context.Context, I) (O, error) {
	return func(ctx context.Context, input I) (O, error) {
		return handler(ctx, input, nexus.StartOperationOptions{})
	}
}

// nexusCall is what an execution of a Nexus operation knows of its
// request.
type nexusCall struct {
	opts       nexus.StartOperationOptions
	perRequest bool         // keyed by the request ID (Policy.OncePerRun)
	request    NexusRequest // what Options.NexusTenant is asked about
}

type nexusCallKey struct{}

// nexusBody runs a Nexus handler as the dispatcher runs an activity's body.
type nexusBody struct {
	interceptor.ActivityInboundInterceptorBase
	run func(ctx context.Context, args ...any) (any, error)
}

func (b *nexusBody) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	return b.run(ctx, in.Args...)
}

// runNexus takes one Nexus start request through the dispatcher.
func (i *Interceptor) runNexus(ctx context.Context, decl *activity.Declaration, call *nexusCall,
	input any, body func(context.Context, ...any) (any, error)) (any, error) {
	hi := nexus.ExtractHandlerInfo(ctx)
	oi := temporalnexus.GetOperationInfo(ctx)
	opts := call.opts
	call.request = NexusRequest{
		Namespace: oi.Namespace, TaskQueue: oi.TaskQueue, Endpoint: oi.Endpoint,
		Service: hi.Service, Operation: hi.Operation, RequestID: opts.RequestID,
		Header: maps.Clone(hi.Header),
	}
	var info sdkactivity.Info
	info.ActivityType.Name = decl.Name()
	info.ActivityID = opts.RequestID
	// Tells this handler call apart from the others of the request in its
	// holder name, as a standalone activity's run ID does.
	info.ActivityRunID = newCallID()
	info.Attempt = 1
	info.Namespace = oi.Namespace
	info.TaskQueue = oi.TaskQueue
	x := &execution{
		root:  i,
		opts:  &i.opts,
		next:  &nexusBody{run: body},
		decl:  decl,
		kind:  decl.Kind(),
		info:  info,
		rep:   reporter{opts: &i.opts, event: baseEvent(decl, info)},
		codec: codec{dc: i.opts.dataConverter(ctx), activity: decl.Name()},
		nexus: call,
	}
	x.rep.metrics = temporalnexus.GetMetricsHandler(ctx).WithTags(map[string]string{
		"activity_type":    decl.Name(),
		"idempotency_kind": decl.Kind().String(),
	})
	return x.run(context.WithValue(ctx, nexusCallKey{}, call), &interceptor.ExecuteActivityInput{Args: []any{input}})
}

// scope is the scope of the key of a Nexus operation called in namespace:
// see NexusOperation.
func (c *nexusCall) scope(namespace string) string {
	scope := "nexus\x00" + namespace + "\x00" + c.request.Service
	if c.perRequest {
		scope += "\x00" + c.opts.RequestID
	}
	return scope
}

// errNexusNoRequestID refuses a request keyed by its ID that carries none.
var errNexusNoRequestID = errors.New("idempotency: the Nexus start request carries no request ID")

func newCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ExecuteNexusOperation carries the workflow's tenant to a Nexus
// operation's handler in the request's [TenantHeader] header, unless the
// call sets that header itself. It is the caller's word: a handler
// honours it only for endpoints it trusts ([NexusTenantFromHeader]). (The SDK
// marks this method experimental; it is the only way a workflow's Nexus
// calls carry a header.) The header is part of the scheduling command but
// not of what replay compares, so histories recorded without it replay.
func (o *workflowOutbound) ExecuteNexusOperation(ctx workflow.Context, in interceptor.ExecuteNexusOperationInput) workflow.NexusOperationFuture {
	if t, ok := WorkflowTenant(ctx); ok && in.NexusHeader.Get(TenantHeader) == "" {
		h := maps.Clone(in.NexusHeader)
		if h == nil {
			h = nexus.Header{}
		}
		h.Set(TenantHeader, t)
		in.NexusHeader = h
	}
	return o.Next.ExecuteNexusOperation(ctx, in)
}
