package interceptor_test

import (
	"context"
	"testing"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
)

type seat struct {
	Flight string `json:"flight"`
}

func bookSeat(context.Context, seat, nexus.StartOperationOptions) (string, error) { return "12A", nil }

// TestNexusOperationDeclarations: a Nexus operation takes the policies an
// activity does, named for the operation, and refuses those it cannot
// honour, before anything is registered.
func TestNexusOperationDeclarations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	op, err := interceptor.NexusOperation(h.ic, "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}}, bookSeat)
	require.NoError(t, err)
	assert.Equal(t, "book-seat", op.Name())

	_, err = interceptor.NexusOperation(h.ic, "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"row"}}, bookSeat)
	assert.ErrorIs(t, err, activity.ErrInvalidDeclaration, "a key argument the input does not have")

	_, err = interceptor.NexusOperation(h.ic, "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, Transactional: true}, bookSeat)
	assert.ErrorIs(t, err, interceptor.ErrNexusDeclaration)
	assert.ErrorIs(t, err, activity.ErrInvalidDeclaration)

	_, err = interceptor.NexusOperation(h.ic, "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"},
			Probe: func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
				return activity.ProbeAnswer{}, nil
			}},
		bookSeat)
	assert.ErrorIs(t, err, interceptor.ErrNexusDeclaration)

	op, err = interceptor.NexusOperation(h.ic, "seat-map", activity.Policy{Kind: activity.KindReadOnly}, bookSeat)
	require.NoError(t, err, "READ_ONLY runs the handler as it is")
	assert.Equal(t, "seat-map", op.Name())
}

// TestNexusTenantFuncs: the handler's tenant functions read only what the
// server sets, but for the header of an endpoint the handler trusts.
func TestNexusTenantFuncs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	req := func(endpoint, header string) interceptor.NexusRequest {
		r := interceptor.NexusRequest{Namespace: "airline", TaskQueue: "seats", Endpoint: endpoint, Service: "seats", Operation: "book-seat", RequestID: "r1"}
		if header != "" {
			r.Header = nexus.Header{interceptor.TenantHeader: header}
		}
		return r
	}
	type want struct {
		tenant string
		ok     bool
	}
	ask := func(f interceptor.NexusTenantFunc, r interceptor.NexusRequest) want {
		tenant, ok := f(ctx, r)
		return want{tenant, ok}
	}

	assert.Equal(t, want{"airline", true}, ask(interceptor.NexusTenantFromNamespace, req("acme-ep", "globex")), "the namespace, whatever the header")
	assert.Equal(t, want{"", false}, ask(interceptor.NexusTenantFromNamespace, interceptor.NexusRequest{}))

	tenants := map[string]string{"acme-ep": "acme", "globex-ep": "globex", "blank-ep": ""}
	byEndpoint := interceptor.NexusTenantByEndpoint(tenants)
	tenants["acme-ep"] = "changed after the fact"
	assert.Equal(t, want{"acme", true}, ask(byEndpoint, req("acme-ep", "globex")), "the endpoint's tenant, not the header's")
	assert.Equal(t, want{"globex", true}, ask(byEndpoint, req("globex-ep", "acme")))
	assert.Equal(t, want{"", false}, ask(byEndpoint, req("other-ep", "acme")), "an endpoint it does not name")
	assert.Equal(t, want{"", false}, ask(byEndpoint, req("", "acme")), "no endpoint")
	assert.Equal(t, want{"", false}, ask(byEndpoint, req("blank-ep", "acme")), "an empty tenant is none")

	fromHeader := interceptor.NexusTenantFromHeader("platform-ep", "")
	assert.Equal(t, want{"acme", true}, ask(fromHeader, req("platform-ep", "acme")), "a trusted endpoint's header")
	assert.Equal(t, want{"", false}, ask(fromHeader, req("platform-ep", "")), "a trusted endpoint without the header")
	assert.Equal(t, want{"", false}, ask(fromHeader, req("public-ep", "acme")), "an untrusted endpoint's header")
	assert.Equal(t, want{"", false}, ask(fromHeader, req("", "acme")), "no endpoint, though \"\" was listed")
	assert.Equal(t, want{"", false}, ask(interceptor.NexusTenantFromHeader(), req("platform-ep", "acme")), "trusting none")
}
