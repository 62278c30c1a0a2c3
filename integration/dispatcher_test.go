package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// airline is the downstream the activities book against. Its ledger records
// every effect; a body may be told to outlive its attempt or to fail.
type airline struct {
	ledger *Ledger
	// hold keeps the body running this long before its effect, ignoring
	// its context, as a slow downstream would.
	hold time.Duration
	// failures makes the first N calls fail; noEffect marks those failures
	// as certainly without effect.
	failures int
	noEffect bool
	// finished is closed when a body that outlived its attempt returns.
	finished chan struct{}
	// landed, if set, is called with the body's context once its effect
	// has landed, before the body returns.
	landed func(ctx context.Context)
	// lostAnswers makes the first N calls land their effect and then fail,
	// as a gateway timing out after the airline booked would.
	lostAnswers int
	// probe declares the activity with the airline's probe (see Probe).
	probe bool
	// probeAnswer, if set, replaces the airline's answer to a probe.
	probeAnswer func(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error)

	mu       sync.Mutex
	bookings map[keyspace.Key]string // by the Idempotency-Key the body sent
	probes   int
}

func (a *airline) Book(ctx context.Context, req BookRequest) (string, error) {
	call := a.ledger.call(req.Flight)
	if _, ok := activity.Key(ctx); !ok {
		return "", errors.New("the dispatcher did not hand the body its key")
	}
	if call <= a.failures {
		err := fmt.Errorf("airline: gateway timeout on call %d", call)
		if a.noEffect {
			return "", activity.NoEffect(err)
		}
		return "", err
	}
	if a.hold > 0 {
		time.Sleep(a.hold)
		if a.finished != nil {
			defer close(a.finished)
		}
	}
	n := a.ledger.effect(req.Flight)
	seat := fmt.Sprintf("seat %d on %s for %s", n, req.Flight, req.RequestID)
	key, _ := activity.Key(ctx)
	a.mu.Lock()
	if a.bookings == nil {
		a.bookings = map[keyspace.Key]string{}
	}
	a.bookings[key] = seat
	a.mu.Unlock()
	if a.landed != nil {
		a.landed(ctx)
	}
	if call <= a.failures+a.lostAnswers {
		return "", fmt.Errorf("airline: gateway timeout on call %d, after the booking", call)
	}
	return seat, nil
}

// Probe answers "what happened to Idempotency-Key K?" from the airline's
// bookings, as an airline's booking lookup does: the seat if a booking was
// made under the key, not landed otherwise. It never books.
func (a *airline) Probe(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
	a.mu.Lock()
	a.probes++
	a.mu.Unlock()
	if a.probeAnswer != nil {
		return a.probeAnswer(ctx, req)
	}
	return a.bookedAnswer(req.Key), nil
}

// bookedAnswer is what the airline knows of key: landed with the seat it
// booked under it, or not landed.
func (a *airline) bookedAnswer(key keyspace.Key) activity.ProbeAnswer {
	a.mu.Lock()
	seat, ok := a.bookings[key]
	a.mu.Unlock()
	if !ok {
		return activity.AnswerNotLanded()
	}
	return activity.AnswerLanded(seat)
}

func (a *airline) probesAsked() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.probes
}

// TwoBookings books one flight twice in one workflow turn, as a model that
// repeats itself would: same key arguments, a fresh request id each.
func TwoBookings(ctx workflow.Context, flight string) ([]string, error) {
	ctx = activityOptions(ctx, 30*time.Second, time.Second)
	f1 := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "req-1"})
	f2 := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "req-2"})
	var r1, r2 string
	if err := f1.Get(ctx, &r1); err != nil {
		return nil, err
	}
	if err := f2.Get(ctx, &r2); err != nil {
		return nil, err
	}
	return []string{r1, r2}, nil
}

// OneBooking books once with the given timeouts.
func OneBooking(ctx workflow.Context, flight string, startToClose, retryInterval time.Duration) (string, error) {
	ctx = activityOptions(ctx, startToClose, retryInterval)
	var r string
	err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "req-" + workflow.GetInfo(ctx).WorkflowExecution.RunID}).Get(ctx, &r)
	return r, err
}

func newAirlineEnv(t *testing.T, st store.Store, kind activity.Kind, a *airline) *env {
	t.Helper()
	return newAirlineEnvWith(t, st, kind, a, interceptor.Options{Lease: 2 * time.Second})
}

// newAirlineEnvWith is newAirlineEnv with opts, registering the workflows
// given besides TwoBookings and OneBooking.
func newAirlineEnvWith(t *testing.T, st store.Store, kind activity.Kind, a *airline, opts interceptor.Options, workflows ...any) *env {
	t.Helper()
	e := newEnv(t, st, opts)
	a.ledger = e.ledger
	registerAirline(t, e.worker, kind, a, workflows...)
	e.start()
	return e
}

// registerAirline registers a's booking activity, declared kind (with a's
// probe if a.probe), TwoBookings, OneBooking and workflows with w.
func registerAirline(t *testing.T, w *worker.Worker, kind activity.Kind, a *airline, workflows ...any) {
	t.Helper()
	policy := activity.Policy{Kind: kind, KeyArguments: []string{"flight"}}
	if a.probe {
		policy.Probe = a.Probe
	}
	require.NoError(t, w.Register(activity.MustDeclare(a.Book, policy)))
	w.RegisterWorkflow(TwoBookings)
	w.RegisterWorkflow(OneBooking)
	for _, wf := range workflows {
		w.RegisterWorkflow(wf)
	}
}

func forEachStore(t *testing.T, f func(t *testing.T, st store.Store)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			f(t, s.open(t))
		})
	}
}

// Two identical calls in one workflow turn collapse into one execution, and
// both futures get the same result.
func TestConcurrentDuplicatesCollapse(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnv(t, st, activity.KindEffectful, &airline{hold: 300 * time.Millisecond})
		var results []string
		require.NoError(t, e.execute("acme", TwoBookings, &results, "BA117"))
		require.Len(t, results, 2)
		assert.Equal(t, results[0], results[1], "both futures get the first caller's answer")
		assert.True(t, strings.HasPrefix(results[0], "seat 1 on BA117"), results[0])
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking")
		assert.Equal(t, 1, e.ledger.Calls("BA117"), "the duplicate never entered the body")
		assert.Equal(t, 1, e.events.count(interceptor.EventDeduplicated))
	})
}

// The first attempt outlives its start-to-close timeout but records its
// outcome before the retry starts: the retry gets the recorded answer and
// the workflow completes with one booking.
func TestTimedOutAttemptRecordedBeforeRetry(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnv(t, st, activity.KindEffectful, &airline{hold: 1500 * time.Millisecond})
		var result string
		require.NoError(t, e.execute("acme", OneBooking, &result, "BA117", time.Second, 3*time.Second))
		assert.True(t, strings.HasPrefix(result, "seat 1 on BA117"), result)
		assert.Equal(t, 1, e.ledger.Effects("BA117"))
		assert.Equal(t, 1, e.ledger.Calls("BA117"))
		assert.Equal(t, 1, e.events.count(interceptor.EventDeduplicated))
	})
}

// The first attempt is still running when Temporal starts the retry: it
// outlived its start-to-close timeout, ignoring its cancellation, and is
// about to book. The retry neither books again nor declares the holder lost
// (which would put a person in front of an effect that had an answer): it
// waits, heartbeating, for the running attempt, whose renewals keep its
// claim alive until its body returns, and answers with its result.
func TestTimedOutAttemptStillRunningAtRetry(t *testing.T) {
	t.Parallel()
	for _, kind := range []activity.Kind{activity.KindEffectful, activity.KindIdempotent} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			forEachStore(t, func(t *testing.T, st store.Store) {
				a := &airline{hold: 4 * time.Second, finished: make(chan struct{})}
				e := newAirlineEnv(t, st, kind, a)
				var result string
				err := e.execute("acme", OneBooking, &result, "BA117", time.Second, time.Second)
				require.NoError(t, err, "the retry answers with the slow attempt's result")
				assert.True(t, strings.HasPrefix(result, "seat 1 on BA117"), result)
				<-a.finished
				assert.Equal(t, 1, e.ledger.Effects("BA117"), "no second booking")
				assert.Equal(t, 1, e.ledger.Calls("BA117"))
				assert.Zero(t, e.events.count(interceptor.EventIndeterminate), "nobody is asked")
				assert.Zero(t, e.events.count(interceptor.EventTakenOver))
				assert.Positive(t, e.events.count(interceptor.EventWaiting), "the retry waited")
				assert.Equal(t, 1, e.events.count(interceptor.EventDeduplicated))
			})
		})
	}
}

// An EFFECTFUL failure stops the run with the typed error even though the
// retry policy allows five attempts.
func TestEffectfulFailureStopsRun(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnv(t, st, activity.KindEffectful, &airline{failures: 100})
		var result string
		err := e.execute("acme", OneBooking, &result, "BA117", 10*time.Second, 100*time.Millisecond)
		o := requireIndeterminate(t, err, activity.ReasonBodyFailed)
		assert.True(t, o.BodyEntered)
		assert.Equal(t, "Book", o.Activity)
		assert.Contains(t, o.Cause, "gateway timeout")
		assert.Equal(t, 1, e.ledger.Calls("BA117"), "no retry")
	})
}

// An IDEMPOTENT failure frees the key and the retry policy applies.
func TestIdempotentFailureRetries(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnv(t, st, activity.KindIdempotent, &airline{failures: 2})
		var result string
		require.NoError(t, e.execute("acme", OneBooking, &result, "BA117", 10*time.Second, 100*time.Millisecond))
		assert.True(t, strings.HasPrefix(result, "seat 1 on BA117"), result)
		assert.Equal(t, 3, e.ledger.Calls("BA117"))
		assert.Equal(t, 1, e.ledger.Effects("BA117"))
		assert.Equal(t, 2, e.events.count(interceptor.EventReleased))
	})
}

// An EFFECTFUL failure marked NoEffect frees the key: the retry books.
func TestNoEffectFailureRetries(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnv(t, st, activity.KindEffectful, &airline{failures: 1, noEffect: true})
		var result string
		require.NoError(t, e.execute("acme", OneBooking, &result, "BA117", 10*time.Second, 100*time.Millisecond))
		assert.Equal(t, 2, e.ledger.Calls("BA117"))
		assert.Equal(t, 1, e.ledger.Effects("BA117"))
	})
}

// Tenants are isolated: the same booking under two tenants is two effects.
func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newAirlineEnv(t, st, activity.KindEffectful, &airline{})
		var r1, r2 string
		require.NoError(t, e.execute("acme", OneBooking, &r1, "BA117", 10*time.Second, time.Second))
		require.NoError(t, e.execute("globex", OneBooking, &r2, "BA117", 10*time.Second, time.Second))
		assert.Equal(t, 2, e.ledger.Effects("BA117"))
	})
}

// A workflow started without a tenant cannot derive a key: an EFFECTFUL
// activity is never entered, and the call fails at once, not retried, with
// the configuration error (not an indeterminate outcome).
func TestNoTenantNeverEntersEffectfulBody(t *testing.T) {
	t.Parallel()
	e := newAirlineEnv(t, stores[0].open(t), activity.KindEffectful, &airline{})
	var result string
	err := e.execute("", OneBooking, &result, "BA117", 10*time.Second, time.Second)
	requireNoTenant(t, err)
	assert.Equal(t, 0, e.ledger.Calls("BA117"))
	assert.Equal(t, 1, e.events.count(interceptor.EventMisconfigured), "one attempt: not retried")
	assert.Zero(t, e.events.count(interceptor.EventIndeterminate))
}
