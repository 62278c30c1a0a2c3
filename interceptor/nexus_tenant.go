package interceptor

import (
	"context"
	"maps"

	"github.com/nexus-rpc/sdk-go/nexus"
)

// NexusRequest is what the handler's worker knows of a Nexus start request
// when it resolves the request's tenant ([Options].NexusTenant). Only
// Namespace, TaskQueue and Endpoint come from the server; the rest is the
// caller's to write.
type NexusRequest struct {
	// Namespace and TaskQueue are the handler worker's own.
	Namespace string
	TaskQueue string
	// Endpoint is the Nexus endpoint the request was addressed to, as the
	// server reports it: set by the server from the route the request
	// took, never by the caller. Empty on a server older than 1.30, and
	// for a request dispatched to the task queue directly rather than
	// through an endpoint. Who may send requests through an endpoint is
	// the deployment's to restrict (Temporal Cloud's allowed caller
	// namespaces per endpoint; the open-source server lets every namespace
	// of the cluster use every endpoint unless its endpoint registry or
	// authorizer is replaced): an endpoint says who called only as far as
	// that restriction holds.
	Endpoint string
	// Service and Operation name what the request starts.
	Service   string
	Operation string
	// RequestID is the start request's ID. The server gives every
	// delivery of one scheduled operation the same one.
	RequestID string
	// Header is the request's Nexus header as the caller wrote it
	// (lower-case names): nothing in it is authenticated. A workflow
	// worker with the plugin writes its workflow's tenant in [TenantHeader].
	Header nexus.Header
}

// NexusTenantFunc resolves the tenant of a Nexus start request on the
// handler's side ([Options].NexusTenant). It reports false when the
// request has none: the request is then refused, non-retryable, with
// decision.ErrorTypeNoTenant, and the handler does not run.
type NexusTenantFunc func(ctx context.Context, req NexusRequest) (string, bool)

// NexusTenantFromNamespace is the [NexusTenantFunc] of a handler whose
// namespace is its tenant: every caller of the handler is of that one
// tenant, and shares its keys.
func NexusTenantFromNamespace(_ context.Context, req NexusRequest) (string, bool) {
	return req.Namespace, req.Namespace != ""
}

// NexusTenantByEndpoint returns the [NexusTenantFunc] of a handler that
// serves each tenant through an endpoint of its own: the tenant is the one
// tenants maps the request's endpoint to, and a request through an
// endpoint it does not name has none (refused). It holds as far as the
// deployment lets only each tenant's namespaces use the tenant's endpoint.
func NexusTenantByEndpoint(tenants map[string]string) NexusTenantFunc {
	tenants = maps.Clone(tenants)
	return func(_ context.Context, req NexusRequest) (string, bool) {
		if req.Endpoint == "" {
			return "", false
		}
		t, ok := tenants[req.Endpoint]
		return t, ok && t != ""
	}
}

// NexusTenantFromHeader returns the [NexusTenantFunc] that takes the tenant
// the caller wrote in the request's [TenantHeader] header — but only for a
// request that came through one of the trusted endpoints, whose callers the
// handler trusts to name any tenant (its own platform's workflows, say). A
// request through any other endpoint, or through none, or without the
// header, has no tenant (refused). The header is the caller's word: trust
// an endpoint only when the deployment lets nobody else use it.
func NexusTenantFromHeader(trusted ...string) NexusTenantFunc {
	set := make(map[string]bool, len(trusted))
	for _, e := range trusted {
		if e != "" {
			set[e] = true
		}
	}
	return func(_ context.Context, req NexusRequest) (string, bool) {
		if req.Endpoint == "" || !set[req.Endpoint] {
			return "", false
		}
		t := req.Header.Get(TenantHeader)
		return t, t != ""
	}
}

// nexusTenant resolves the tenant of the Nexus request x runs: see
// Options.NexusTenant.
func (x *execution) nexusTenant(ctx context.Context) (string, bool) {
	if f := x.opts.NexusTenant; f != nil {
		return f(ctx, x.nexus.request)
	}
	if x.opts.DefaultTenant != "" {
		return x.opts.DefaultTenant, true
	}
	return NexusTenantFromNamespace(ctx, x.nexus.request)
}
