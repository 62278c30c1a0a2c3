package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
)

// A workflow started by a client without the tenant propagator — as the
// temporal CLI, the Web UI, a schedule or another SDK start one — runs
// under the tenant of its memo, or the worker's default; without either
// its declared calls fail with the no-tenant configuration error.
func TestTenantForWorkflowsStartedOutsideGo(t *testing.T) {
	t.Parallel()
	plain := server.GetDefaultClient() // no tenant propagator
	cases := []struct {
		name       string
		defaultT   string
		memo       map[string]any
		wantTenant string
	}{
		{"memo", "", map[string]any{interceptor.TenantMemo: "acme"}, "acme"},
		{"worker default", "solo", nil, "solo"},
		{"none", "", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := store.NewMemory(store.MemoryOptions{})
			require.NoError(t, err)
			e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{},
				interceptor.Options{Lease: 2 * time.Second, DefaultTenant: tc.defaultT})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run, err := plain.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: testenv.UniqueName("wf"), TaskQueue: e.queue, Memo: tc.memo,
			}, "OneBooking", "BA117", 10*time.Second, 100*time.Millisecond)
			require.NoError(t, err)
			var result string
			err = run.Get(ctx, &result)
			if tc.wantTenant == "" {
				requireNoTenant(t, err)
				assert.Equal(t, 0, e.ledger.Calls("BA117"))
				return
			}
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(result, "seat 1 on BA117"), result)
			var tenants []string
			for _, ev := range e.events.all() {
				if ev.Kind == interceptor.EventClaimed {
					tenants = append(tenants, ev.Tenant)
				}
			}
			assert.Equal(t, []string{tc.wantTenant}, tenants)
		})
	}
}

// cliMemo builds a workflow's memo as the temporal CLI (v1.5.1) builds it
// from its --memo flags: each flag is KEY=VALUE, split at the first "=",
// VALUE decoded as exactly one JSON value; the map goes to the SDK client's
// StartWorkflowOptions.Memo, which encodes each value as a payload with the
// client's data converter (json/plain for the CLI's default one).
func cliMemo(t *testing.T, flags ...string) map[string]any {
	t.Helper()
	memo := map[string]any{}
	for _, f := range flags {
		key, value, ok := strings.Cut(f, "=")
		require.True(t, ok, "a --memo flag is KEY=VALUE: %q", f)
		dec := json.NewDecoder(strings.NewReader(value))
		var v any
		require.NoError(t, dec.Decode(&v), "the CLI refuses a VALUE that is not JSON: %q", f)
		require.Equal(t, int64(len(value)), dec.InputOffset(), "the CLI refuses trailing data: %q", f)
		memo[key] = v
	}
	return memo
}

// The tenant memo exactly as the temporal CLI sends it — temporal workflow
// start --memo 'idempotency-tenant="acme"' — is a json/plain payload the
// worker reads the tenant from. --memo idempotency-tenant=42 (a number)
// gives no tenant, whatever the worker's DefaultTenant: the call fails with
// the configuration error, which says the memo held none, names the three
// ways to give one, and is not an outcome a person decides.
func TestTenantMemoAsTheCLIWritesIt(t *testing.T) {
	t.Parallel()
	plain := server.GetDefaultClient() // the CLI's client: no tenant propagator, the default converter
	for _, tc := range []struct {
		name, flag, wantTenant string
	}{
		{"string", `idempotency-tenant="acme"`, "acme"},
		{"number", `idempotency-tenant=42`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := store.NewMemory(store.MemoryOptions{})
			require.NoError(t, err)
			e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{},
				interceptor.Options{Lease: 2 * time.Second, DefaultTenant: "solo", AwaitDecision: true})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run, err := plain.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: testenv.UniqueName("wf"), TaskQueue: e.queue, Memo: cliMemo(t, tc.flag),
			}, "OneBooking", "BA117", 10*time.Second, 100*time.Millisecond)
			require.NoError(t, err)

			// The payload the server keeps is the CLI's: json/plain.
			desc, err := plain.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
			require.NoError(t, err)
			p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[interceptor.TenantMemo]
			require.NotNil(t, p)
			assert.Equal(t, "json/plain", string(p.GetMetadata()["encoding"]))
			_, value, _ := strings.Cut(tc.flag, "=")
			assert.JSONEq(t, value, string(p.GetData()))

			var result string
			err = run.Get(ctx, &result)
			if tc.wantTenant == "" {
				requireNoTenant(t, err)
				assert.Contains(t, err.Error(), "memo idempotency-tenant holds no tenant")
				assert.Contains(t, err.Error(), `--memo 'idempotency-tenant="acme"'`)
				assert.Equal(t, 0, e.ledger.Calls("BA117"))
				assert.Zero(t, e.events.count(interceptor.EventClaimed), "not under the worker's default either")
				return
			}
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(result, "seat 1 on BA117"), result)
			assert.Equal(t, tc.wantTenant, e.events.all()[0].Tenant)
		})
	}
}

func (l *eventLog) all() []interceptor.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]interceptor.Event(nil), l.events...)
}
