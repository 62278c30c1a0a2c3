package integration

import (
	"context"
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

func (l *eventLog) all() []interceptor.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]interceptor.Event(nil), l.events...)
}
