package interceptor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// downstream is what Charge books against: it keeps the bookings that
// landed, by idempotency key, and answers a probe from them, as a payment
// provider answers "what happened to Idempotency-Key K?".
type downstream struct {
	mu     sync.Mutex
	landed map[string]Booking
	// asked counts the probes; last is the latest request.
	asked int
	last  activity.ProbeRequest
	// answer, if set, replaces the downstream's own answer.
	answer func(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error)
}

func (d *downstream) probe(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
	d.mu.Lock()
	d.asked++
	d.last = req
	answer := d.answer
	b, ok := d.landed[string(req.Key)]
	d.mu.Unlock()
	if k, _ := activity.Key(ctx); k != req.Key {
		return activity.ProbeAnswer{}, errors.New("the probe's context does not carry the key")
	}
	if answer != nil {
		return answer(ctx, req)
	}
	if ok {
		return activity.AnswerLanded(b), nil
	}
	return activity.AnswerNotLanded(), nil
}

func (d *downstream) timesAsked() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked
}

// Charge is declared EFFECTFUL with key argument "flight" and the
// downstream's probe. The hook decides whether the body lands its effect
// (a nil error) or fails before it (an error); a hook returning errLost
// lands the effect and then loses the answer.
func (c *charger) Charge(ctx context.Context, req BookRequest) (Booking, error) {
	a, d := c.acts, c.down
	b, err := a.body(ctx, "Charge", req)
	if errors.Is(err, errLost) {
		key, _ := activity.Key(ctx)
		b = Booking{Flight: req.Flight, Call: a.ledger.count("Charge"), Key: string(key)}
		d.mu.Lock()
		d.landed[string(key)] = b
		d.mu.Unlock()
		return Booking{}, err
	}
	return b, err
}

// charger holds Charge: the harness's activities booking against a
// downstream.
type charger struct {
	acts *acts
	down *downstream
}

// errLost is the hook's way of saying the effect landed and the answer was
// lost on the way back.
var errLost = errors.New("gateway timeout after the charge landed")

// probed is the harness with Charge declared and probed.
type probed struct {
	*harness
	charger *charger
}

// probeHarness returns the harness with Charge declared and probed.
func probeHarness(t *testing.T, configure ...func(*interceptor.Options)) (*probed, *downstream) {
	t.Helper()
	d := &downstream{landed: map[string]Booking{}}
	h := &probed{harness: newHarness(t, configure...)}
	h.charger = &charger{acts: h.acts, down: d}
	decl, err := activity.Effectful(h.charger.Charge, "flight").WithProbe(d.probe)
	require.NoError(t, err)
	require.NoError(t, h.ic.Declare(decl))
	h.decls["Charge"] = decl
	return h, d
}

func (h *probed) probeEnv(t *testing.T) *testsuite.TestActivityEnvironment {
	env := h.activityEnv(t, "acme")
	env.RegisterActivity(h.charger.Charge)
	return env
}

func TestProbeLanded(t *testing.T) {
	t.Parallel()
	h, d := probeHarness(t)
	h.acts.on("Charge", func(context.Context, int, BookRequest) error { return errLost })
	env := h.probeEnv(t)
	req := BookRequest{Flight: "BA117", RequestID: "a"}

	got, err := book(env, h.charger.Charge, req)
	require.NoError(t, err, "the probe found the effect: the call succeeds with its result")
	assert.Equal(t, 1, got.Call)
	assert.NotEmpty(t, got.Key)
	assert.Equal(t, 1, d.timesAsked())
	rec, err := h.lookup(t, "acme", got.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State, "the probe's result is recorded")

	h.acts.on("Charge", nil)
	again, err := book(env, h.charger.Charge, BookRequest{Flight: "BA117", RequestID: "b"})
	require.NoError(t, err)
	assert.Equal(t, got, again, "a duplicate gets the probed result")
	assert.Equal(t, 1, h.acts.ledger.count("Charge"), "one body, one effect")
	assert.Equal(t, []interceptor.EventKind{
		interceptor.EventClaimed, interceptor.EventProbeLanded, interceptor.EventCompleted,
		interceptor.EventDeduplicated,
	}, h.rec.kinds())
	assert.Equal(t, activity.ReasonBodyFailed, h.rec.first(t, interceptor.EventProbeLanded).Reason)
}

func TestProbeNotLanded(t *testing.T) {
	t.Parallel()
	h, d := probeHarness(t)
	h.acts.on("Charge", func(_ context.Context, call int, _ BookRequest) error {
		if call == 1 {
			return errors.New("gateway timeout before the charge")
		}
		return nil
	})
	env := h.probeEnv(t)
	req := BookRequest{Flight: "BA117", RequestID: "a"}

	_, err := book(env, h.charger.Charge, req)
	appErr := requireApplicationError(t, err, decision.ErrorTypeNotLanded)
	assert.False(t, appErr.NonRetryable(), "the retry policy runs it again")
	assert.Contains(t, err.Error(), "gateway timeout before the charge")
	_, ok := activity.AsIndeterminate(err)
	assert.False(t, ok, "nobody is asked to decide")
	assert.Equal(t, 1, d.timesAsked())
	assert.Zero(t, h.mem.Len(), "the key is free")

	got, err := book(env, h.charger.Charge, req)
	require.NoError(t, err, "the retry runs the body")
	assert.Equal(t, 2, got.Call)
	assert.Equal(t, []interceptor.EventKind{
		interceptor.EventClaimed, interceptor.EventProbeNotLanded, interceptor.EventReleased,
		interceptor.EventClaimed, interceptor.EventCompleted,
	}, h.rec.kinds())
}

// A body that failed with a non-retryable error of its own keeps it: the
// key is freed, and the retry policy does what the body asked.
func TestProbeNotLandedKeepsNonRetryable(t *testing.T) {
	t.Parallel()
	h, _ := probeHarness(t)
	h.acts.on("Charge", func(context.Context, int, BookRequest) error {
		return temporal.NewNonRetryableApplicationError("card refused", "CardRefused", nil)
	})
	env := h.probeEnv(t)
	_, err := book(env, h.charger.Charge, BookRequest{Flight: "BA117"})
	appErr := requireApplicationError(t, err, "CardRefused")
	assert.True(t, appErr.NonRetryable())
	assert.Zero(t, h.mem.Len(), "the key is free")
}

func TestProbeUnsettled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer func(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error)
		// cause is what the indeterminate error and the event say.
		cause string
	}{
		{"CannotTell", func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			return activity.AnswerCannotTell(), nil
		}, "probe: cannot tell"},
		{"ProbeError", func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			return activity.AnswerLanded(Booking{}), errors.New("provider's lookup API is down")
		}, "provider's lookup API is down"},
		{"ProbePanics", func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			panic("boom")
		}, "the probe panicked: boom"},
		{"WrongResultType", func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			return activity.AnswerLanded("seat 14C"), nil
		}, "result of type string; the activity returns interceptor_test.Booking"},
		{"UnknownLanding", func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			return activity.ProbeAnswer{Landing: 9}, nil
		}, "unknown landing 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, d := probeHarness(t)
			d.answer = tt.answer
			h.acts.on("Charge", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
			env := h.probeEnv(t)
			_, err := book(env, h.charger.Charge, BookRequest{Flight: "BA117"})
			o := requireIndeterminate(t, err, activity.ReasonBodyFailed, true)
			assert.Contains(t, o.Cause, "gateway timeout")
			assert.Contains(t, o.Cause, tt.cause)
			rec, err := h.lookup(t, "acme", o.Key)
			require.NoError(t, err)
			assert.Equal(t, store.StateIndeterminate, rec.State, "nothing settled: the key stays indeterminate")
			assert.Equal(t, []interceptor.EventKind{
				interceptor.EventClaimed, interceptor.EventProbeUnsettled, interceptor.EventIndeterminate,
			}, h.rec.kinds())
			ev := h.rec.first(t, interceptor.EventProbeUnsettled)
			if tt.name == "CannotTell" {
				assert.NoError(t, ev.Err)
			} else {
				require.Error(t, ev.Err)
				assert.Contains(t, ev.Err.Error(), tt.cause)
			}
		})
	}
}

// A key taken over from a holder that stopped answering is probed too: the
// lost holder's effect landed, and its result answers the call with no
// body run here.
func TestProbeHolderLost(t *testing.T) {
	t.Parallel()
	for _, landed := range []bool{true, false} {
		name := map[bool]string{true: "Landed", false: "NotLanded"}[landed]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, d := probeHarness(t)
			env := h.probeEnv(t)
			req := BookRequest{Flight: "BA117"}
			key, _ := h.preclaim(t, env, "Charge", req, time.Second)
			if landed {
				d.landed[key] = Booking{Flight: "BA117", Call: 7, Key: key}
			}
			o := receive(t, h.runPastLease(t, env, h.charger.Charge, req, false), "the execution")
			d.mu.Lock()
			probed := d.last
			d.mu.Unlock()
			assert.Equal(t, activity.ProbeRequest{Activity: "Charge", Tenant: "acme", Key: keyspace.Key(key),
				Reason: activity.ReasonHolderLost, BodyEntered: false}, probed)
			assert.Zero(t, h.acts.ledger.count("Charge"), "no body ran here")
			if landed {
				require.NoError(t, o.err)
				assert.Equal(t, 7, o.booking.Call, "the lost holder's result")
				rec, err := h.lookup(t, "acme", key)
				require.NoError(t, err)
				assert.Equal(t, store.StateCompleted, rec.State)
				return
			}
			requireApplicationError(t, o.err, decision.ErrorTypeNotLanded)
			assert.Zero(t, h.mem.Len(), "the key is free")
			got, err := book(env, h.charger.Charge, req)
			require.NoError(t, err)
			assert.Equal(t, 1, got.Call, "the retry runs the body once")
		})
	}
}

// ChargeOnce calls Charge once with a short start-to-close and no retry.
func ChargeOnce(ctx workflow.Context, flight string) (Booking, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var b Booking
	err := workflow.ExecuteActivity(ctx, "Charge", BookRequest{Flight: flight}).Get(ctx, &b)
	return b, err
}

// A probe that does not answer before the activity's deadline settles
// nothing, even when it answers later, and does not hold the call up past
// its deadline.
func TestProbeSlowerThanDeadline(t *testing.T) {
	t.Parallel()
	h, d := probeHarness(t)
	release := make(chan struct{})
	answered := make(chan struct{})
	d.answer = func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
		defer close(answered)
		<-release // ignores its context, as a stuck client would
		return activity.AnswerLanded(Booking{Call: 99}), nil
	}
	h.acts.on("Charge", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	metrics := newCountingHandler()
	h.suite.SetMetricsHandler(metrics)
	env := h.workflowEnv(t, "acme")
	env.RegisterActivity(h.charger.Charge)
	env.RegisterWorkflow(ChargeOnce)
	late := h.rec.next(interceptor.EventProbeLate)
	env.ExecuteWorkflow(ChargeOnce, "BA117")
	ev := receive(t, late, "the probe to be given up on")
	require.Error(t, ev.Err)
	assert.Contains(t, ev.Err.Error(), "did not answer before the activity's deadline")
	close(release)
	receive(t, answered, "the late answer")

	err := env.GetWorkflowError()
	require.Error(t, err)
	o, ok := activity.AsIndeterminate(err)
	require.True(t, ok, "want the indeterminate error, got %v", err)
	rec, lerr := h.lookup(t, "acme", o.Key)
	require.NoError(t, lerr)
	assert.Equal(t, store.StateIndeterminate, rec.State, "the late answer is not recorded")
	assert.Zero(t, h.rec.count(interceptor.EventProbeLanded))
	assert.Zero(t, h.rec.count(interceptor.EventProbeUnsettled), "reported as late, not as unable to tell")
	assert.Equal(t, int64(1), metrics.counter(metricname.ProbeLate, "Charge", "EFFECTFUL"))
	assert.Zero(t, metrics.counter(metricname.ProbeUnsettled, "Charge", "EFFECTFUL"))
}

// A probe that takes longer than StoreTimeout, well within the activity's
// time, on a healthy store: what it answers is recorded. The store calls
// that settle the outcome get StoreTimeout of their own once the probe has
// answered, so a slow probe never reads as a store outage (no store error,
// no orphaned claim, no record left pending after the call returned). Both
// paths that probe are covered: a body that failed, and a key taken over
// from a lost holder.
func TestProbeSlowerThanStoreTimeout(t *testing.T) {
	t.Parallel()
	const storeTimeout = 20 * time.Millisecond
	slow := func(d *downstream) {
		d.answer = func(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
			time.Sleep(10 * storeTimeout) // the activity has minutes left
			return activity.AnswerLanded(Booking{Flight: "BA117", Call: 7, Key: string(req.Key)}), nil
		}
	}
	t.Run("BodyFailed", func(t *testing.T) {
		t.Parallel()
		h, d := probeHarness(t, func(o *interceptor.Options) { o.StoreTimeout = storeTimeout })
		slow(d)
		h.acts.on("Charge", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
		env := h.probeEnv(t)
		got, err := book(env, h.charger.Charge, BookRequest{Flight: "BA117"})
		require.NoError(t, err, "the probe found the effect")
		assert.Equal(t, 7, got.Call)
		rec, err := h.lookup(t, "acme", got.Key)
		require.NoError(t, err)
		assert.Equal(t, store.StateCompleted, rec.State, "the probe's answer is recorded when the call returns")
		assert.Equal(t, []interceptor.EventKind{
			interceptor.EventClaimed, interceptor.EventProbeLanded, interceptor.EventCompleted,
		}, h.rec.kinds(), "no store_error, no orphaned")
	})
	t.Run("HolderLost", func(t *testing.T) {
		t.Parallel()
		h, d := probeHarness(t, func(o *interceptor.Options) { o.StoreTimeout = storeTimeout })
		slow(d)
		env := h.probeEnv(t)
		req := BookRequest{Flight: "BA117"}
		key, _ := h.preclaim(t, env, "Charge", req, time.Second)
		o := receive(t, h.runPastLease(t, env, h.charger.Charge, req, false), "the execution")
		require.NoError(t, o.err, "the probe found the lost holder's effect")
		assert.Equal(t, 7, o.booking.Call)
		rec, err := h.lookup(t, "acme", key)
		require.NoError(t, err)
		assert.Equal(t, store.StateCompleted, rec.State, "the probe's answer is recorded when the call returns")
		assert.Zero(t, h.rec.count(interceptor.EventStoreError))
		assert.Zero(t, h.rec.count(interceptor.EventOrphaned))
		assert.Equal(t, 1, h.rec.count(interceptor.EventCompleted))
	})
}

// Probes are counted by what they settled.
func TestProbeMetrics(t *testing.T) {
	t.Parallel()
	h, d := probeHarness(t)
	metrics := newCountingHandler()
	h.suite.SetMetricsHandler(metrics)
	env := h.probeEnv(t)
	h.acts.on("Charge", func(_ context.Context, call int, _ BookRequest) error {
		if call == 1 {
			return errLost
		}
		return errors.New("gateway timeout")
	})
	_, err := book(env, h.charger.Charge, BookRequest{Flight: "F1"}) // landed
	require.NoError(t, err)
	_, err = book(env, h.charger.Charge, BookRequest{Flight: "F2"}) // not landed
	requireApplicationError(t, err, decision.ErrorTypeNotLanded)
	d.answer = func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
		return activity.AnswerCannotTell(), nil
	}
	_, err = book(env, h.charger.Charge, BookRequest{Flight: "F3"}) // cannot tell
	requireIndeterminate(t, err, activity.ReasonBodyFailed, true)

	c := func(name string) int64 { return metrics.counter(name, "Charge", "EFFECTFUL") }
	assert.Equal(t, int64(3), c(metricname.Probes))
	assert.Equal(t, int64(1), c(metricname.ProbeLanded))
	assert.Equal(t, int64(1), c(metricname.ProbeNotLanded))
	assert.Equal(t, int64(1), c(metricname.ProbeUnsettled))
	assert.Equal(t, int64(1), c(metricname.Indeterminate), "only the probe that could not tell leaves an indeterminate outcome")
	assert.Equal(t, 3, metrics.timer(metricname.ProbeLatency, "Charge", "EFFECTFUL"))
}

// The claim stays this execution's while its probe runs: the lease is
// renewed as it is while the body runs, so a duplicate waits for the probe's
// answer instead of finding the holder lost.
func TestProbeKeepsTheLease(t *testing.T) {
	t.Parallel()
	h, d := probeHarness(t)
	h.acts.on("Charge", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	renewed := make(chan bool, 1)
	d.answer = func(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
		rec, err := h.lookup(t, "acme", string(req.Key))
		if err != nil {
			return activity.ProbeAnswer{}, err
		}
		claimedUntil := rec.LeaseUntil
		h.clock.Advance(time.Second) // past the 300 ms lease, unless renewed
		deadline := time.Now().Add(10 * time.Second)
		ok := false
		for !ok && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			rec, err = h.lookup(t, "acme", string(req.Key))
			ok = err == nil && rec.LeaseUntil.After(claimedUntil.Add(time.Second/2))
		}
		renewed <- ok
		return activity.AnswerCannotTell(), nil
	}
	env := h.probeEnv(t)
	_, err := book(env, h.charger.Charge, BookRequest{Flight: "BA117"})
	requireIndeterminate(t, err, activity.ReasonBodyFailed, true)
	assert.True(t, <-renewed, "the lease was renewed while the probe ran")
}

// A claim taken over while its probe runs is another caller's: the probe's
// context ends with ErrSuperseded, and nothing it answers is written.
func TestProbeSuperseded(t *testing.T) {
	t.Parallel()
	h, d := probeHarness(t)
	h.acts.on("Charge", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	var taker int64
	d.answer = func(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
		rec, err := h.lookup(t, "acme", string(req.Key))
		if err != nil {
			return activity.ProbeAnswer{}, err
		}
		h.faults.setDown("Renew", true)
		h.clock.Advance(time.Second)
		res, err := h.mem.Claim(context.Background(), store.ClaimParams{
			Tenant: "acme", Key: string(req.Key), Holder: "worker-elsewhere", Lease: time.Minute, Supersede: rec.Token,
		})
		if err != nil || res.Status != store.StatusAcquired {
			return activity.ProbeAnswer{}, errors.New("the test could not take the key over")
		}
		taker = res.Record.Token
		h.faults.setDown("Renew", false)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), interceptor.ErrSuperseded) {
			return activity.ProbeAnswer{}, context.Cause(ctx)
		}
		return activity.AnswerLanded(Booking{Call: 99}), nil
	}
	env := h.probeEnv(t)
	_, err := book(env, h.charger.Charge, BookRequest{Flight: "BA117"})
	o := requireIndeterminate(t, err, activity.ReasonHolderLost, true)
	assert.Contains(t, o.Cause, interceptor.ErrSuperseded.Error())
	rec, err := h.lookup(t, "acme", o.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StatePending, rec.State, "the new holder's claim is untouched")
	assert.Equal(t, taker, rec.Token)
	assert.Equal(t, 1, h.rec.count(interceptor.EventSuperseded))
	assert.Zero(t, h.rec.count(interceptor.EventProbeLanded))
}

// A local activity's outcome is probed as a regular one's.
func TestProbeLocalActivity(t *testing.T) {
	t.Parallel()
	h, d := probeHarness(t)
	h.acts.on("Charge", func(context.Context, int, BookRequest) error { return errLost })
	env := h.probeEnv(t)
	val, err := env.ExecuteLocalActivity(h.charger.Charge, BookRequest{Flight: "BA117"})
	require.NoError(t, err)
	var got Booking
	require.NoError(t, val.Get(&got))
	assert.Equal(t, 1, got.Call)
	assert.Equal(t, 1, d.timesAsked())
	assert.Equal(t, 1, h.rec.count(interceptor.EventProbeLanded))
}
