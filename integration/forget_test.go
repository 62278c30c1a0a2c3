package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
)

// idempotencyctl forget while a tenant's workflow runs: a booking holds its
// key and its duplicate waits for it. Without -force the command refuses,
// naming the held key, and the trip books one seat; with -force (the legal
// erasure's case) the waiting duplicate finds its key free and books a
// second — the cost the help states.
func TestCtlForgetWhileWorkflowsRun(t *testing.T) {
	t.Parallel()
	for _, force := range []bool{false, true} {
		name := "refused"
		if force {
			name = "forced"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctlBinary(t) // built before the trip starts: the forget must land while it runs
			st, global := ctlStore(t)
			e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{hold: 5 * time.Second}, interceptor.Options{Lease: 2 * time.Second})
			ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
			defer cancel()
			run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue}, TwoBookings, "BA117")
			require.NoError(t, err)
			require.Eventually(t, func() bool { return e.events.count(interceptor.EventWaiting) >= 1 }, 30*time.Second, 20*time.Millisecond,
				"the duplicate waits on the held key")

			args := append(global, "forget", "-tenant", "acme", "-yes")
			if force {
				args = append(args, "-force")
			}
			r := ctl(t, temporalEnv(), args...)
			var seats []string
			require.NoError(t, run.Get(ctx, &seats))
			if !force {
				assert.Equal(t, 1, r.code, "stdout: %s", r.stdout)
				assert.Contains(t, r.stderr, "refusing to erase tenant acme: 1 record is held or waiting for a decision")
				assert.Equal(t, 1, e.ledger.Effects("BA117"), "a refused forget repeated an effect")
				assert.Equal(t, seats[0], seats[1])
				return
			}
			require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			assert.Equal(t, 2, e.ledger.Effects("BA117"), "the forced erasure's cost: the waiting duplicate booked again")
		})
	}
}
