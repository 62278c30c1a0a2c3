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
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
)

// With AwaitDecision, a booking whose answer was lost holds its workflow
// until a person decides through the query and the signal; the decision is
// recorded against the key on the way.
func TestAwaitDecision(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		decide  func(o activity.IndeterminateOutcome) decision.Decision
		calls   int
		effects int
		result  string
	}{
		{
			name: "complete",
			decide: func(o activity.IndeterminateOutcome) decision.Decision {
				result, _ := json.Marshal("seat 1 on BA117, confirmed by phone")
				return decision.Decision{Key: o.Key, Action: decision.ActionComplete, Result: result, By: "ops@acme"}
			},
			calls: 1, effects: 0, result: "seat 1 on BA117, confirmed by phone",
		},
		{
			name: "free",
			decide: func(o activity.IndeterminateOutcome) decision.Decision {
				return decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"}
			},
			calls: 2, effects: 1, result: "seat 1 on BA117",
		},
	}
	forEachStore(t, func(t *testing.T, st store.Store) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{failures: 1},
					interceptor.Options{Lease: 2 * time.Second, AwaitDecision: true})
				ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
				defer cancel()
				run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID: testenv.UniqueName("wf"), TaskQueue: e.queue,
				}, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
				require.NoError(t, err)

				var pending []decision.PendingDecision
				require.Eventually(t, func() bool {
					v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
					return err == nil && v.Get(&pending) == nil && len(pending) == 1
				}, 30*time.Second, 50*time.Millisecond, "the workflow publishes what it waits for")
				o := pending[0].Outcome
				assert.Equal(t, activity.ReasonBodyFailed, o.Reason)
				rec, err := st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
				require.NoError(t, err)
				require.Equal(t, store.StateIndeterminate, rec.State)

				require.NoError(t, e.client.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), decision.SignalName, tc.decide(o)))
				var result string
				require.NoError(t, run.Get(ctx, &result))
				assert.True(t, strings.HasPrefix(result, tc.result), result)
				assert.Equal(t, tc.calls, e.ledger.Calls("BA117"))
				assert.Equal(t, tc.effects, e.ledger.Effects("BA117"))

				rec, err = st.Lookup(ctx, store.LookupParams{Tenant: o.Tenant, Key: o.Key})
				require.NoError(t, err)
				assert.Equal(t, store.StateCompleted, rec.State, "the decision, or the fresh run, is on record for later duplicates")
			})
		}
	})
}
