package interceptor_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/wire"
)

// headerlessEnv is a workflow environment whose workflow carries no tenant
// header, as one started from the temporal CLI, the Web UI, a schedule or
// another SDK does.
func headerlessEnv(t *testing.T, h *harness, memo map[string]any) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := h.suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{h.ic}})
	env.SetContextPropagators([]workflow.ContextPropagator{interceptor.TenantPropagator()})
	if memo != nil {
		require.NoError(t, env.SetMemoOnStart(memo))
	}
	h.register(env)
	return env
}

func claimedTenants(h *harness) []string {
	var out []string
	for _, e := range h.rec.all() {
		if e.Kind == interceptor.EventClaimed {
			out = append(out, e.Tenant)
		}
	}
	return out
}

func TestWorkflowTenantFromMemo(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	env := headerlessEnv(t, h, map[string]any{interceptor.TenantMemo: "acme"})
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []string{"acme"}, claimedTenants(h))
}

func TestWorkflowTenantDefault(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.DefaultTenant = "solo" })
	env := headerlessEnv(t, h, nil)
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []string{"solo"}, claimedTenants(h))
}

// The header wins over the memo, and the memo over the default.
func TestWorkflowTenantPrecedence(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.DefaultTenant = "solo" })
	env := h.workflowEnv(t, "acme")
	require.NoError(t, env.SetMemoOnStart(map[string]any{interceptor.TenantMemo: "globex"}))
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())

	env = headerlessEnv(t, h, map[string]any{interceptor.TenantMemo: "globex"})
	env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA118", RequestID: "a"})
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []string{"acme", "globex"}, claimedTenants(h))
}

// Without a header, a memo or a default, every declared call fails at once
// with the non-retryable no-tenant error, which names the three ways to give
// one; a memo that is not a string is no tenant either, and the message says
// so. It is a configuration error: a workflow that waits for decisions does
// not wait on it, and nobody is asked.
func TestWorkflowTenantNone(t *testing.T) {
	t.Parallel()
	for _, await := range []bool{false, true} {
		h := newHarness(t, func(o *interceptor.Options) { o.AwaitDecision = await })
		for _, tc := range []struct {
			memo map[string]any
			says string
		}{
			{nil, "carries no tenant"},
			{map[string]any{interceptor.TenantMemo: 42}, "memo idempotency-tenant holds no tenant: "},
			{map[string]any{interceptor.TenantMemo: ""}, "memo idempotency-tenant holds no tenant: it is empty"},
		} {
			env := headerlessEnv(t, h, tc.memo)
			env.ExecuteWorkflow(Once, "Book", BookRequest{Flight: "BA117", RequestID: "a"})
			err := env.GetWorkflowError()
			require.Error(t, err, "the workflow ends; it does not wait")
			appErr := requireApplicationError(t, err, decision.ErrorTypeNoTenant)
			assert.True(t, appErr.NonRetryable())
			_, ok := activity.AsIndeterminate(err)
			assert.False(t, ok, "%v", err)
			assert.Contains(t, err.Error(), tc.says)
			assert.Contains(t, err.Error(), "--memo 'idempotency-tenant=\"acme\"'")
		}
		assert.Equal(t, 0, h.acts.ledger.count("Book"))
		assert.Zero(t, h.rec.count(interceptor.EventIndeterminate))
		assert.Equal(t, 3, h.rec.count(interceptor.EventMisconfigured))
	}
}

// A default tenant or a search attribute name no one could use is refused
// by New, naming the field.
func TestNewRefusesBadDecisionOptions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, opts := range []interceptor.Options{
		{Store: h.mem, DefaultTenant: "ac\x00me"},
		{Store: h.mem, DefaultTenant: string(make([]byte, 300))},
		{Store: h.mem, PendingSearchAttribute: "Idempotency Pending"},
		{Store: h.mem, PendingSearchAttribute: "9keys"},
	} {
		_, err := interceptor.New(opts)
		var oe *interceptor.OptionsError
		require.ErrorAs(t, err, &oe, "%+v", opts)
		assert.ErrorIs(t, err, interceptor.ErrInvalidOptions)
	}
	_, err := interceptor.New(interceptor.Options{Store: h.mem, DefaultTenant: "acme", PendingSearchAttribute: interceptor.DefaultPendingSearchAttribute})
	require.NoError(t, err)
}

// A call run again after a decision, in a workflow whose history predates
// TenantChangeID (GetVersion answers DefaultVersion, as a replay of such a
// history does), runs under the tenant of the record decided on, not the
// DefaultTenant of the worker replaying it: that worker may have been
// redeployed with another one since the record was made. A workflow whose
// default is fixed by its history keeps it: the outcome's tenant is what
// Options.Tenant made of the header, which is not always the header itself.
func TestRerunAfterDecisionUnderTheDecidedTenant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		legacy bool
		want   string
	}{
		{"HistoryBeforeTenantChangeID", true, "acme"},
		{"TenantFixedByHistory", false, "acme-eu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *interceptor.Options) { o.AwaitDecision = true; o.DefaultTenant = "acme-eu" })
			env := headerlessEnv(t, h, nil)
			if tc.legacy {
				env.OnGetVersion(wire.TenantChangeID, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			var tenants []string
			h.acts.on("Plain", func(ctx context.Context, call int, _ BookRequest) error {
				tenant, _ := interceptor.TenantFromContext(ctx)
				tenants = append(tenants, tenant)
				if call == 1 {
					// The record was made under acme, by a worker whose
					// DefaultTenant was acme then.
					return activity.NewIndeterminateError(activity.IndeterminateOutcome{
						Activity: "Plain", Tenant: "acme", Key: "v1:" + strings.Repeat("ab", 32),
						Reason: activity.ReasonBodyFailed, BodyEntered: true, EffectMayHaveLanded: true,
					}, errors.New("gateway timeout"))
				}
				return nil
			})
			pendingThen(t, env, func(p []decision.PendingDecision) decision.Decision {
				require.Len(t, p, 1)
				return decision.Decision{Key: p[0].Outcome.Key, Action: decision.ActionRetry, By: "ops@acme"}
			})
			env.ExecuteWorkflow(Once, "Plain", BookRequest{Flight: "BA117", RequestID: "a"})
			require.NoError(t, env.GetWorkflowError())
			assert.Equal(t, []string{"acme-eu", tc.want}, tenants)
		})
	}
}
