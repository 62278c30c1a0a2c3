package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// A booking lands and its answer is lost on the way back: the airline's
// probe finds it, the workflow gets the seat, nobody is asked, and the
// effect happened once.
func TestProbeLandedAgainstServer(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		a := &airline{lostAnswers: 1, probe: true}
		e := newAirlineEnv(t, st, activity.KindEffectful, a)
		var seat string
		require.NoError(t, e.execute("acme", OneBooking, &seat, "BA117", 10*time.Second, 500*time.Millisecond))
		assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking")
		assert.Equal(t, 1, e.ledger.Calls("BA117"), "no second attempt")
		assert.Equal(t, 1, a.probesAsked())
		assert.Equal(t, 1, e.events.count(interceptor.EventProbeLanded))
		assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
	})
}

// The gateway timed out before the airline booked: the probe says so, the
// key is freed, and the workflow's retry policy books once.
func TestProbeNotLandedAgainstServer(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		a := &airline{failures: 1, probe: true}
		e := newAirlineEnv(t, st, activity.KindEffectful, a)
		var seat string
		require.NoError(t, e.execute("acme", OneBooking, &seat, "BA117", 10*time.Second, 200*time.Millisecond))
		assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking")
		assert.Equal(t, 2, e.ledger.Calls("BA117"), "the retry ran the body")
		assert.Equal(t, 1, e.events.count(interceptor.EventProbeNotLanded))
		assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
	})
}

// A probe that cannot tell, fails, or answers after the activity's deadline
// settles nothing: the workflow gets the indeterminate error as without a
// probe, the key stays indeterminate, and nothing was booked twice.
func TestProbeUnsettledAgainstServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer func(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error)
		cause  string
	}{
		{"CannotTell", func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			return activity.AnswerCannotTell(), nil
		}, "probe: cannot tell"},
		{"ProbeError", func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			return activity.ProbeAnswer{}, errors.New("booking lookup: 503")
		}, "booking lookup: 503"},
		{"SlowerThanDeadline", func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			// Ignores its context, as a stuck client would, and answers
			// long after the 2 s start-to-close.
			time.Sleep(4 * time.Second)
			return activity.AnswerNotLanded(), nil
		}, "did not answer before the activity's deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forEachStore(t, func(t *testing.T, st store.Store) {
				a := &airline{failures: 1000, probe: true, probeAnswer: tt.answer}
				e := newAirlineEnv(t, st, activity.KindEffectful, a)
				var seat string
				err := e.execute("acme", OneBooking, &seat, "BA117", 2*time.Second, 200*time.Millisecond)
				o := requireIndeterminate(t, err, activity.ReasonBodyFailed)
				assert.Contains(t, o.Cause, tt.cause)
				var timeout *temporal.TimeoutError
				assert.False(t, errors.As(err, &timeout), "the answer reached Temporal before the deadline")
				assert.Equal(t, 1, e.ledger.Calls("BA117"), "not retried")
				assert.Zero(t, e.ledger.Effects("BA117"))
				late := tt.name == "SlowerThanDeadline"
				assert.Equal(t, map[bool]int{false: 1}[late], e.events.count(interceptor.EventProbeUnsettled))
				assert.Equal(t, map[bool]int{true: 1}[late], e.events.count(interceptor.EventProbeLate))
				rec, err := st.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: o.Key})
				require.NoError(t, err)
				assert.Equal(t, store.StateIndeterminate, rec.State)
			})
		})
	}
}

// A probe slower than StoreTimeout, within the activity's time, against a
// healthy store: the landed answer is recorded (the store writes get a
// StoreTimeout of their own once the probe answered), nothing is reported
// as a store error or an orphaned claim, and the seat was booked once.
func TestProbeSlowerThanStoreTimeoutAgainstServer(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		const storeTimeout = 200 * time.Millisecond
		a := &airline{lostAnswers: 1, probe: true}
		a.probeAnswer = func(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
			time.Sleep(5 * storeTimeout) // a slow lookup; the activity has seconds left
			return a.bookedAnswer(req.Key), nil
		}
		e := newAirlineEnvWith(t, st, activity.KindEffectful, a, interceptor.Options{Lease: 2 * time.Second, StoreTimeout: storeTimeout})
		var seat string
		require.NoError(t, e.execute("acme", OneBooking, &seat, "BA117", 10*time.Second, 500*time.Millisecond))
		assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking")
		assert.Equal(t, 1, e.ledger.Calls("BA117"), "no second attempt")
		assert.Equal(t, 1, e.events.count(interceptor.EventProbeLanded))
		assert.Zero(t, e.events.count(interceptor.EventStoreError))
		assert.Zero(t, e.events.count(interceptor.EventOrphaned))
		key := completedKey(t, e.events)
		rec, err := st.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: key})
		require.NoError(t, err)
		assert.Equal(t, store.StateCompleted, rec.State)
	})
}

// A worker died holding the key (its claim is left pending and its lease
// runs out). The next attempt asks the airline instead of putting the call
// to a person: the seat the dead worker booked answers it, or, if the
// airline has no booking under the key, the retry books once.
func TestProbeHolderLostAgainstServer(t *testing.T) {
	t.Parallel()
	for _, landed := range []bool{true, false} {
		name := map[bool]string{true: "Landed", false: "NotLanded"}[landed]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachStore(t, func(t *testing.T, st store.Store) {
				a := &airline{probe: true}
				e := newAirlineEnvWith(t, st, activity.KindEffectful, a,
					interceptor.Options{Lease: 2 * time.Second, Scope: interceptor.ScopeWorkflow})
				id := testenv.UniqueName("wf")
				decl := activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})
				key, err := decl.Key("acme", id, []any{BookRequest{Flight: "BA117"}})
				require.NoError(t, err)
				// The dead worker's claim, with a lease about to run out.
				res, err := st.Claim(context.Background(), store.ClaimParams{
					Tenant: "acme", Key: string(key), Holder: "dead-worker", Lease: 500 * time.Millisecond,
				})
				require.NoError(t, err)
				require.Equal(t, store.StatusAcquired, res.Status)
				if landed {
					a.mu.Lock()
					a.bookings = map[keyspace.Key]string{key: "seat 7 on BA117 for the dead worker"}
					a.mu.Unlock()
				}

				ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), time.Minute)
				defer cancel()
				run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: e.queue},
					OneBooking, "BA117", 10*time.Second, 200*time.Millisecond)
				require.NoError(t, err)
				var seat string
				require.NoError(t, run.Get(ctx, &seat))
				assert.Equal(t, 1, a.probesAsked())
				if landed {
					assert.Equal(t, "seat 7 on BA117 for the dead worker", seat)
					assert.Zero(t, e.ledger.Calls("BA117"), "no body ran: the dead worker's booking answers")
					assert.Equal(t, 1, e.events.count(interceptor.EventProbeLanded))
					return
				}
				assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
				assert.Equal(t, 1, e.ledger.Calls("BA117"), "the retry booked once")
				assert.Equal(t, 1, e.ledger.Effects("BA117"))
				assert.Equal(t, 1, e.events.count(interceptor.EventProbeNotLanded))
				assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
			})
		})
	}
}

// The booking lands but the body outlives its start-to-close before it
// fails (the answer was lost after a slow booking): its answer cannot reach
// Temporal any more, yet the probe is still asked, within the store's
// timeout, and what it says is recorded. The retry, waiting on the key,
// gets the seat; nobody is asked and nothing is booked twice.
func TestProbeAfterTheDeadlineSettlesTheRecord(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		a := &airline{hold: 3 * time.Second, lostAnswers: 1, probe: true}
		e := newAirlineEnv(t, st, activity.KindEffectful, a)
		var seat string
		require.NoError(t, e.execute("acme", OneBooking, &seat, "BA117", 2*time.Second, 200*time.Millisecond))
		assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking")
		assert.Equal(t, 1, e.ledger.Calls("BA117"), "the retry did not run the body")
		assert.Equal(t, 1, e.events.count(interceptor.EventProbeLanded))
		assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
	})
}
