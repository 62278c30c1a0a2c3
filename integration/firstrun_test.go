package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
)

// BookThenFailOnce books flight and then, in its first attempt, fails
// after the booking completed, as a workflow whose later step fails does;
// Temporal retries the workflow (its retry policy), and the next attempt
// books the same flight again.
func BookThenFailOnce(ctx workflow.Context, flight string) (string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	var seat string
	if err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "req-" + flight}).Get(ctx, &seat); err != nil {
		return "", err
	}
	if workflow.GetInfo(ctx).Attempt == 1 {
		return "", errors.New("the step after the booking failed")
	}
	return seat, nil
}

// A workflow retry re-runs completed effects under ScopeRun (temporalio/
// temporal#8901: a retried workflow re-creates external records); under
// ScopeFirstRun the retry's call answers from the first attempt's record,
// and a new start of the same workflow ID, a chain of its own, books
// afresh. One booking per chain, every store.
func TestScopeFirstRunAcrossAWorkflowRetry(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		for _, tc := range []struct {
			scope interceptor.Scope
			want  int // bookings of the retried workflow
		}{
			{interceptor.ScopeRun, 2},
			{interceptor.ScopeFirstRun, 1},
		} {
			e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{}, interceptor.Options{Lease: 2 * time.Second, Scope: tc.scope}, BookThenFailOnce)
			ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
			defer cancel()
			flight := testenv.UniqueName("F")
			id := testenv.UniqueName("wf")
			start := client.StartWorkflowOptions{ID: id, TaskQueue: e.queue,
				RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 2}}
			run, err := e.client.ExecuteWorkflow(ctx, start, BookThenFailOnce, flight)
			require.NoError(t, err)
			var seat string
			require.NoError(t, run.Get(ctx, &seat))
			assert.Equal(t, tc.want, e.ledger.Effects(flight), "scope %s: bookings across the workflow's retry", tc.scope)

			if tc.scope == interceptor.ScopeFirstRun {
				// A new start of the ID is a new chain: its call is a
				// new effect, booked once across its own retry.
				run, err = e.client.ExecuteWorkflow(ctx, start, BookThenFailOnce, flight)
				require.NoError(t, err)
				require.NoError(t, run.Get(ctx, &seat))
				assert.Equal(t, 2, e.ledger.Effects(flight), "a new start of the workflow ID booked once more, and once only")
			}
		}
	})
}

// A reset keeps the chain's first run: under ScopeFirstRun a run reset to
// before its EFFECTFUL call answers from the record, as under ScopeRun.
func TestScopeFirstRunAcrossAReset(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{}, interceptor.Options{Lease: 2 * time.Second, Scope: interceptor.ScopeFirstRun}, BookThenWait)
		ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
		defer cancel()
		flight := testenv.UniqueName("F")
		run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue}, BookThenWait, flight)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return e.ledger.Effects(flight) == 1 }, 30*time.Second, 20*time.Millisecond)
		reset := resetToFirstTask(ctx, t, e.client, run)
		require.Eventually(t, func() bool {
			return e.events.count(interceptor.EventDeduplicated) == 1 || e.ledger.Effects(flight) > 1
		}, 30*time.Second, 20*time.Millisecond)
		require.NoError(t, e.client.SignalWorkflow(ctx, reset.GetID(), reset.GetRunID(), resetGoSignal, nil))
		var got string
		require.NoError(t, reset.Get(ctx, &got))
		assert.Equal(t, 1, e.ledger.Effects(flight), "the reset booked again")
	})
}
