package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// cardGateway declines every charge: a definite failure, which the
// declaration names.
type cardGateway struct{ ledger *Ledger }

func (g *cardGateway) Charge(_ context.Context, req BookRequest) (string, error) {
	g.ledger.call(req.Flight)
	return "", temporal.NewNonRetryableApplicationError("card declined: insufficient funds", "CardDeclined", nil)
}

// ChargeTwice charges one order twice, one call after the other, and
// returns the type of each call's error.
func ChargeTwice(ctx workflow.Context, order string) ([]string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	var types []string
	for range 2 {
		err := workflow.ExecuteActivity(ctx, "Charge", BookRequest{Flight: order}).Get(ctx, nil)
		var ae *temporal.ApplicationError
		if _, indeterminate := activity.AsIndeterminate(err); indeterminate {
			types = append(types, "indeterminate")
		} else if errors.As(err, &ae) {
			types = append(types, ae.Type())
		} else {
			types = append(types, "?")
		}
	}
	return types, nil
}

// With AwaitDecision, a declined card reaches the workflow as the
// CardDeclined error — no person is asked — and the second charge of the
// same order gets it from the record without calling the gateway.
func TestDefiniteFailureNeedsNoPerson(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st, interceptor.Options{Lease: 2 * time.Second, AwaitDecision: true})
		g := &cardGateway{ledger: e.ledger}
		require.NoError(t, e.worker.Register(activity.MustDeclare(g.Charge, activity.Policy{Kind: activity.KindEffectful,
			KeyArguments: []string{"flight"}, DefiniteErrors: []string{"CardDeclined"}})))
		e.worker.RegisterWorkflow(ChargeTwice)
		e.start()
		var types []string
		require.NoError(t, e.execute("acme", ChargeTwice, &types, "order-1"))
		assert.Equal(t, []string{"CardDeclined", "CardDeclined"}, types)
		assert.Equal(t, 1, e.ledger.Calls("order-1"), "the second charge answered from the record")
		assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
	})
}
