package interceptor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
)

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.activityEnv(t, "acme")
	globex := h.activityEnv(t, "globex")
	req := BookRequest{Flight: "BA117"}

	a, err := book(acme, h.acts.Book, req)
	require.NoError(t, err)
	g, err := book(globex, h.acts.Book, req)
	require.NoError(t, err)
	assert.Equal(t, 2, h.acts.ledger.count("Book"), "the same arguments under two tenants are two effects")
	assert.NotEqual(t, a.Key, g.Key)
	assert.Zero(t, h.rec.count(interceptor.EventDeduplicated))

	var tenants []string
	for _, e := range h.rec.all() {
		if e.Kind == interceptor.EventClaimed {
			tenants = append(tenants, e.Tenant)
		}
	}
	assert.Equal(t, []string{"acme", "globex"}, tenants)
}

func TestTenantResolution(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tenant interceptor.TenantFunc
		header string
		want   string
	}{
		{"DefaultFromHeader", nil, "acme", "acme"},
		{"Namespace", interceptor.TenantFromNamespace, "acme", "default-test-namespace"},
		{"UserFunc", func(_ context.Context, info sdkactivity.Info) (string, bool) {
			return "by-type-" + info.ActivityType.Name, true
		}, "", "by-type-Book"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *interceptor.Options) { o.Tenant = tt.tenant })
			env := h.activityEnv(t, tt.header)
			_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
			require.NoError(t, err)
			assert.Equal(t, tt.want, h.rec.first(t, interceptor.EventClaimed).Tenant)
		})
	}
}

func TestTenantFuncRefuses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) {
		o.Tenant = func(context.Context, sdkactivity.Info) (string, bool) { return "", false }
	})
	env := h.activityEnv(t, "acme")
	_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
	appErr := requireApplicationError(t, err, decision.ErrorTypeNoTenant)
	assert.False(t, appErr.NonRetryable(), "the worker's own function is configuration a redeploy fixes: retried until it is")
	assert.Contains(t, err.Error(), "Options.Tenant", "a TenantFunc of the user's own refused: the message says so")
	assert.Zero(t, h.acts.ledger.total())
}

func TestTenantContext(t *testing.T) {
	t.Parallel()
	_, ok := interceptor.TenantFromContext(context.Background())
	assert.False(t, ok)
	_, ok = interceptor.TenantFromContext(interceptor.WithTenant(context.Background(), ""))
	assert.False(t, ok, "an empty tenant is none")
	got, ok := interceptor.TenantFromContext(interceptor.WithTenant(context.Background(), "acme"))
	assert.True(t, ok)
	assert.Equal(t, "acme", got)

	got, ok = interceptor.TenantFromHeader(interceptor.WithTenant(context.Background(), "acme"), sdkactivity.Info{})
	assert.True(t, ok)
	assert.Equal(t, "acme", got)
}

func TestTenantFromNamespace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		info   sdkactivity.Info
		want   string
		wantOK bool
	}{
		{"Namespace", sdkactivity.Info{Namespace: "acme"}, "acme", true},
		{"None", sdkactivity.Info{}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := interceptor.TenantFromNamespace(context.Background(), tt.info)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// header is a workflow.HeaderReader and workflow.HeaderWriter.
type header struct{ fields map[string]*commonpb.Payload }

func newHeader() *header { return &header{fields: map[string]*commonpb.Payload{}} }

func (h *header) Set(key string, value *commonpb.Payload) { h.fields[key] = value }

func (h *header) Get(key string) (*commonpb.Payload, bool) {
	p, ok := h.fields[key]
	return p, ok
}

func (h *header) ForEachKey(handler func(string, *commonpb.Payload) error) error {
	for k, v := range h.fields {
		if err := handler(k, v); err != nil {
			return err
		}
	}
	return nil
}

var (
	_ workflow.HeaderReader = (*header)(nil)
	_ workflow.HeaderWriter = (*header)(nil)
)

func TestTenantPropagatorRoundTrip(t *testing.T) {
	t.Parallel()
	p := interceptor.TenantPropagator()
	h := newHeader()
	require.NoError(t, p.Inject(interceptor.WithTenant(context.Background(), "acme"), h))
	require.Contains(t, h.fields, interceptor.TenantHeader)
	var raw string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(h.fields[interceptor.TenantHeader], &raw))
	assert.Equal(t, "acme", raw, "the header holds the tenant as the default converter encodes it")

	ctx, err := p.Extract(context.Background(), h)
	require.NoError(t, err)
	got, ok := interceptor.TenantFromContext(ctx)
	assert.True(t, ok)
	assert.Equal(t, "acme", got)

	empty := newHeader()
	require.NoError(t, p.Inject(context.Background(), empty))
	assert.Empty(t, empty.fields, "no tenant, no header")
	ctx, err = p.Extract(context.Background(), empty)
	require.NoError(t, err)
	_, ok = interceptor.TenantFromContext(ctx)
	assert.False(t, ok)
}

func TestTenantPropagatorRefusesNonString(t *testing.T) {
	t.Parallel()
	h := newHeader()
	pl, err := converter.GetDefaultDataConverter().ToPayload(42)
	require.NoError(t, err)
	h.Set(interceptor.TenantHeader, pl)
	_, err = interceptor.TenantPropagator().Extract(context.Background(), h)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tenant header")
}

// TestTenantFuncGivenIsTheUsers: a TenantFunc given in Options — even
// TenantFromHeader itself, or a wrapper of it — is the user's own, told
// apart from the default by being given, never by comparing functions: the
// two behave alike.
func TestTenantFuncGivenIsTheUsers(t *testing.T) {
	t.Parallel()
	for name, fn := range map[string]interceptor.TenantFunc{
		"TenantFromHeader": interceptor.TenantFromHeader,
		"wrapped": func(ctx context.Context, info sdkactivity.Info) (string, bool) {
			return interceptor.TenantFromHeader(ctx, info)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *interceptor.Options) { o.Tenant = fn })
			env := h.activityEnv(t, "")
			_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
			requireApplicationError(t, err, decision.ErrorTypeNoTenant)
			assert.Contains(t, err.Error(), "Options.Tenant resolved none")
			assert.Zero(t, h.acts.ledger.total())
		})
	}
}

// A worker whose Options.Tenant function resolves a tenant other than the
// one the call's header carries (namespace-per-tenant, while the starter
// named a tenant) reports it once, as EventTenantIgnored naming both: the
// call's record is kept where an operator asking about the starter's tenant
// does not look. Calls whose header agrees, or that have none, report
// nothing.
func TestTenantFuncIgnoringTheHeaderIsReportedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.Tenant = interceptor.TenantFromNamespace })
	const namespace = "default-test-namespace" // the test environment's
	for _, header := range []string{"", namespace, "acme", "globex"} {
		env := h.activityEnv(t, header)
		_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117-" + header})
		require.NoError(t, err)
	}
	require.Equal(t, 1, h.rec.count(interceptor.EventTenantIgnored), "once per worker")
	e := h.rec.first(t, interceptor.EventTenantIgnored)
	assert.Equal(t, namespace, e.Tenant, "the tenant the record is kept under: the namespace")
	assert.Contains(t, e.Err.Error(), `header carries tenant "acme"`)
	assert.False(t, e.Final, "the call goes on")
}
