package integration

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// BookRetryingNotRun books once and, as the quick start shows, runs the
// call again after a pause when it ran nothing because the store did not
// answer: the two lines a workflow without AwaitDecision needs.
func BookRetryingNotRun(ctx workflow.Context, flight string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 2},
	})
	req := BookRequest{Flight: flight, RequestID: "not-run"}
	var r string
	err := workflow.ExecuteActivity(ctx, "Book", req).Get(ctx, &r)
	for i := 0; i < 5; i++ {
		if _, ok := activity.AsNotRun(err); !ok {
			break
		}
		_ = workflow.Sleep(ctx, time.Second)
		err = workflow.ExecuteActivity(ctx, "Book", req).Get(ctx, &r)
	}
	return r, err
}

// BookAttempts books once with startToClose and at most attempts attempts.
func BookAttempts(ctx workflow.Context, flight string, startToClose time.Duration, attempts int32) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: startToClose,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: attempts},
	})
	var r string
	err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "attempts"}).Get(ctx, &r)
	return r, err
}

// BookThenHold books once, then holds the run open until the signal
// "finish", so that what reaches it after the booking (a probe's late
// answer) can be queried.
func BookThenHold(ctx workflow.Context, flight string) (string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	var r string
	if err := workflow.ExecuteActivity(ctx, "Book", BookRequest{Flight: flight, RequestID: "hold"}).Get(ctx, &r); err != nil {
		return "", err
	}
	workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	return r, nil
}

// timerSummaries lists the summaries of the timers run's history started.
func timerSummaries(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) []string {
	t.Helper()
	var out []string
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType() != enumspb.EVENT_TYPE_TIMER_STARTED {
			continue
		}
		var s string
		if p := ev.GetUserMetadata().GetSummary(); p != nil {
			require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &s))
		}
		out = append(out, s)
	}
	return out
}

func startWorkflow(t *testing.T, e *env, wf any, args ...any) client.WorkflowRun {
	t.Helper()
	ctx := interceptor.WithTenant(context.Background(), "acme")
	run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue}, wf, args...)
	require.NoError(t, err)
	return run
}

// A call that ran nothing because the store did not answer (its retry
// policy ran out while it stayed down) is run again by a routed workflow
// after a durable timer, with nobody asked, and books once. Before issue
// 19 it failed indeterminate (store_unavailable) and waited for a person.
func TestOutageBeforeTheBodyNeedsNoPerson(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		// Five attempts, each one failed claim (no retry inside the
		// attempt): the workflow receives NotRun; the claim of the call
		// run again succeeds.
		st = &blippingStore{Store: st, failures: 5, calls: map[string]int{}}
		e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{},
			interceptor.Options{Lease: 2 * time.Second, ClaimRetry: -1, AwaitDecision: true})
		run := startWorkflow(t, e, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var seat string
		require.NoError(t, run.Get(ctx, &seat))
		assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "one effect")
		assert.Zero(t, e.events.count(interceptor.EventIndeterminate), "no outcome was unknown")
		assert.Zero(t, e.events.count(interceptor.EventDecided), "nobody decided anything")
		summaries := timerSummaries(ctx, t, e.client, run)
		require.Len(t, summaries, 1, "one wait for the store")
		assert.Contains(t, summaries[0], "store did not answer")
	})
}

// Without AwaitDecision the workflow receives the typed, retryable error
// that says nothing ran; running the call again books once.
func TestOutageBeforeTheBodyTypedWithoutRouting(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		bl := &blippingStore{Store: st, failures: 2, calls: map[string]int{}}
		e := newAirlineEnvWith(t, bl, activity.KindEffectful, &airline{},
			interceptor.Options{Lease: 2 * time.Second, ClaimRetry: -1}, BookRetryingNotRun, BookAttempts)

		var seat string
		err := e.execute("acme", BookAttempts, &seat, "BA117", 10*time.Second, int32(2))
		n, ok := activity.AsNotRun(err)
		require.Truef(t, ok, "want the not-run error, got %v", err)
		assert.True(t, n.MayRetry)
		assert.False(t, n.EffectMayHaveLanded)
		assert.NotEmpty(t, n.Key)
		_, indeterminate := activity.AsIndeterminate(err)
		assert.False(t, indeterminate)
		assert.Zero(t, e.ledger.Calls("BA117"), "nothing ran")

		bl.calls = map[string]int{} // two more failed claims for the next workflow
		require.NoError(t, e.execute("acme", BookRetryingNotRun, &seat, "BA118"))
		assert.Equal(t, 1, e.ledger.Effects("BA118"), "one effect")
	})
}

// A probe that answers later than the dispatcher asked settles a key a
// person is awaited on: nobody decides, the key is recorded once, and a
// person who decides afterwards is told it is decided.
func TestProbeAnsweringLaterWinsOverAWaitingPerson(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		var mu sync.Mutex
		asked := 0
		a := &airline{lostAnswers: 1, probe: true}
		a.probeAnswer = func(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
			mu.Lock()
			asked++
			first := asked == 1
			mu.Unlock()
			if first {
				return activity.AnswerCannotTell(), nil // the airline has not caught up yet
			}
			return a.bookedAnswer(req.Key), nil
		}
		e := newAirlineEnvWith(t, st, activity.KindEffectful, a, awaitOpts, BookThenHold)
		run, o := startWaiting(t, e.client, e.queue, BookThenHold, "BA117")
		assert.True(t, o.Probe, "the outcome says a probe is declared")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		var pending []decision.PendingDecision
		v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
		require.NoError(t, err)
		require.NoError(t, v.Get(&pending))
		require.Len(t, pending, 1)
		require.NotNil(t, pending[0].Probe, "the schedule is visible")
		assert.Equal(t, 24, pending[0].Probe.Max)
		// And in the current details, a paragraph of its own: the Web UI
		// renders them as Markdown.
		v, err = e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), "__temporal_workflow_metadata")
		require.NoError(t, err)
		var md sdkpb.WorkflowMetadata
		require.NoError(t, v.Get(&md))
		assert.Contains(t, md.GetCurrentDetails(), "\n\nkey "+o.Key+": the probe was asked")

		// The probe's answer settles it with nobody asked.
		require.Eventually(t, func() bool {
			v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
			return err == nil && v.Get(&pending) == nil && len(pending) == 0
		}, 30*time.Second, 100*time.Millisecond)
		_, err = decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"})
		require.Error(t, err, "the person comes second")
		// Rejected with the reason: the probe decided (while its
		// decision is applied), or no call waits any more (after).
		assert.Regexp(t, `already decided \(complete by idempotency\.Probe\)|no call is waiting`, err.Error())

		require.NoError(t, e.client.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "finish", nil))
		var seat string
		require.NoError(t, run.Get(ctx, &seat))
		assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking")
		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: o.Key})
		require.NoError(t, err)
		assert.Equal(t, store.StateCompleted, rec.State)
		assert.Equal(t, decision.ProbeDecider, rec.Resolution.By, "settled by the probe's answer")
		assert.Positive(t, e.events.count(interceptor.EventDecided))
	})
}

// An ask of the probe whose worker dies is asked again on another worker
// within seconds, and its answer settles the key before a person would
// have looked: the ask heartbeats, and Temporal schedules it again when the
// heartbeats stop. Before, an ask had one attempt and no heartbeat timeout:
// the wait heard nothing until its 30 s start-to-close passed, and asked
// again 10 s after that, while the fault run's person had decided.
func TestProbeAskedAgainWhenItsWorkerDies(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		var mu sync.Mutex
		asked := 0
		hung, release := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(release) })
		a := &airline{lostAnswers: 1, probe: true, ledger: newLedger()}
		a.probeAnswer = func(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
			mu.Lock()
			asked++
			n := asked
			mu.Unlock()
			switch n {
			case 1: // the dispatcher's, as the body's answer was lost
				return activity.AnswerCannotTell(), nil
			case 2: // the wait's first ask: its worker dies under it
				close(hung)
				<-release
				return activity.AnswerCannotTell(), nil
			}
			return a.bookedAnswer(req.Key), nil
		}
		queue := testenv.UniqueName("tq")
		opts := awaitOpts
		opts.Store = st
		// The worker that dies: its own connection, and a stop that does
		// not wait for the ask it leaves hanging. Nothing of it logs to
		// the test, which may have ended when the ask returns.
		dying := newClient(server, worker.ClientOptions(client.Options{}, zap.NewNop()))
		wd, err := worker.New(dying, queue, worker.Options{Worker: sdkworker.Options{WorkerStopTimeout: time.Second},
			Idempotency: opts, Logger: zap.NewNop()})
		require.NoError(t, err)
		registerAirline(t, wd, activity.KindEffectful, a, BookThenHold)
		require.NoError(t, wd.Start())

		run, o := startWaiting(t, dying, queue, BookThenHold, "BA117")
		require.True(t, o.Probe)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		select {
		case <-hung:
		case <-ctx.Done():
			t.Fatal("the probe was not asked again")
		}
		live := newClient(server, worker.ClientOptions(client.Options{}, zaptest.NewLogger(t)))
		lw, err := worker.New(live, queue, worker.Options{Worker: workerOptions, Idempotency: opts,
			Logger: zaptest.NewLogger(t)})
		require.NoError(t, err)
		registerAirline(t, lw, activity.KindEffectful, a, BookThenHold)
		require.NoError(t, lw.Start())
		t.Cleanup(lw.Stop)
		died := time.Now()
		wd.Stop()
		dying.Close()

		// The probe's answer settles the key on the live worker, with
		// nobody asked.
		require.Eventually(t, func() bool {
			rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: o.Key})
			return err == nil && rec.State == store.StateCompleted
		}, 20*time.Second, 50*time.Millisecond, "the ask is scheduled again within seconds of its worker's death")
		t.Logf("settled by the probe %s after the ask's worker died", time.Since(died).Round(time.Millisecond))
		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: o.Key})
		require.NoError(t, err)
		assert.Equal(t, decision.ProbeDecider, rec.Resolution.By, "settled by the probe's answer")

		require.NoError(t, live.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "finish", nil))
		var seat string
		require.NoError(t, live.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, &seat))
		assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
		assert.Equal(t, 1, a.ledger.Effects("BA117"), "one booking")
	})
}

// A person who decides while the probe is being asked again wins: the
// probe's later answer is rejected with the reason, listed by the pending
// query, and the record holds the person's decision.
func TestPersonAnsweringFirstWinsOverTheProbe(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		var mu sync.Mutex
		asked := 0
		inFlight, release := make(chan struct{}), make(chan struct{})
		a := &airline{lostAnswers: 1, probe: true}
		a.probeAnswer = func(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
			mu.Lock()
			asked++
			n := asked
			mu.Unlock()
			if n == 1 {
				return activity.AnswerCannotTell(), nil
			}
			if n == 2 {
				close(inFlight)
				<-release // the person decides meanwhile
			}
			a.mu.Lock()
			seat := a.bookings[req.Key]
			a.mu.Unlock()
			return activity.AnswerLanded(seat), nil
		}
		e := newAirlineEnvWith(t, st, activity.KindEffectful, a, awaitOpts, BookThenHold)
		run, o := startWaiting(t, e.client, e.queue, BookThenHold, "BA117")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		select {
		case <-inFlight:
		case <-ctx.Done():
			t.Fatal("the probe was not asked again")
		}
		res, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionComplete,
			Result: json.RawMessage(`"seat 1 on BA117, per the airline's desk"`), By: "ops@acme"})
		close(release)
		require.NoError(t, err)
		assert.Equal(t, decision.AppliedRecorded, res.Applied)

		var pending []decision.PendingDecision
		require.Eventually(t, func() bool {
			v, err := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), decision.QueryName)
			return err == nil && v.Get(&pending) == nil && len(pending) == 1 && pending[0].Rejected != nil
		}, 30*time.Second, 100*time.Millisecond, "the probe's answer is listed as rejected")
		assert.Equal(t, decision.ProbeDecider, pending[0].Rejected.Decision.By)
		assert.Contains(t, pending[0].Rejected.Reason, "already decided (complete by ops@acme)")

		require.NoError(t, e.client.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "finish", nil))
		var seat string
		require.NoError(t, run.Get(ctx, &seat))
		assert.Equal(t, "seat 1 on BA117, per the airline's desk", seat, "the person's answer")
		assert.Equal(t, 1, e.ledger.Effects("BA117"))
		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: o.Key})
		require.NoError(t, err)
		assert.Equal(t, "ops@acme", rec.Resolution.By)
	})
}

// A call whose attempts Temporal timed out while they waited on a holder
// that outlived them reaches the workflow typed (the key, reason timed_out,
// the effect may have landed) — also without AwaitDecision — and, routed,
// waits like any indeterminate outcome; the person's retry then answers
// from the record the slow holder left. Before issue 19 the workflow got a
// plain TimeoutError that no person or probe was asked about.
func TestTimedOutCallReachesTheWorkflowTypedAndRouted(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		t.Run("typed", func(t *testing.T) {
			finished := make(chan struct{})
			e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{hold: 4 * time.Second, finished: finished},
				interceptor.Options{Lease: 2 * time.Second}, BookAttempts)
			var seat string
			err := e.execute("acme", BookAttempts, &seat, "BA117", time.Second, int32(2))
			var te *temporal.TimeoutError
			require.Truef(t, errors.As(err, &te), "Temporal's own timeout: %v", err)
			o, ok := activity.AsIndeterminate(err)
			require.Truef(t, ok, "typed: %v", err)
			assert.Equal(t, activity.ReasonTimedOut, o.Reason)
			assert.NotEmpty(t, o.Key)
			assert.Equal(t, "acme", o.Tenant)
			assert.Equal(t, "Book", o.Activity)
			assert.True(t, o.EffectMayHaveLanded)
			<-finished
		})
		t.Run("routed", func(t *testing.T) {
			finished := make(chan struct{})
			e := newAirlineEnvWith(t, st, activity.KindEffectful, &airline{hold: 4 * time.Second, finished: finished},
				awaitOpts, BookAttempts)
			run, o := startWaiting(t, e.client, e.queue, BookAttempts, "BA118", time.Second, int32(2))
			assert.Equal(t, activity.ReasonTimedOut, o.Reason)
			<-finished // the holder that outlived its attempts records its booking
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.Eventually(t, func() bool {
				rec, err := st.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: o.Key})
				return err == nil && rec.State == store.StateCompleted
			}, 10*time.Second, 50*time.Millisecond)
			res, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionRetry, By: "ops@acme"})
			require.NoError(t, err)
			assert.Equal(t, decision.AppliedRetried, res.Applied)
			var seat string
			require.NoError(t, run.Get(ctx, &seat))
			assert.True(t, strings.HasPrefix(seat, "seat 1 on BA118"), seat)
			assert.Equal(t, 1, e.ledger.Effects("BA118"))
		})
	})
}

// A call Temporal timed out waits with its probe asked at once: nobody has
// asked the probe about this outcome (the dispatcher asks it only for a
// body whose outcome it cannot state). The first idempotency.Probe is
// scheduled before any timer of the probe's schedule, waits for the holder
// that outlived the attempts, and the wait settles with nobody asked.
// Before, the first ask came after a 5 s timer, and the fault run's person,
// who looks at 10 s, was often first: a worker killed in between moved the
// timer's workflow task to another worker only after the sticky queue's
// 5 s.
func TestTimedOutCallAsksTheProbeAtOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		finished := make(chan struct{})
		e := newAirlineEnvWith(t, st, activity.KindEffectful,
			&airline{hold: 4 * time.Second, finished: finished, probe: true}, awaitOpts, BookAttempts)
		run := startWorkflow(t, e, BookAttempts, "BA117", time.Second, int32(2))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var seat string
		require.NoError(t, run.Get(ctx, &seat), "settled with nobody asked")
		<-finished
		assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking")

		var order []string
		it := e.client.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
				order = append(order, "timed out")
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == decision.ProbeActivityName {
					order = append(order, "ask")
				}
			case enumspb.EVENT_TYPE_TIMER_STARTED:
				var summary string
				if p := ev.GetUserMetadata().GetSummary(); p != nil {
					require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &summary))
				}
				if strings.Contains(summary, "the probe of") {
					order = append(order, "probe timer")
				}
			}
		}
		require.NotEmpty(t, order)
		assert.Equal(t, []string{"timed out", "ask"}, order[:min(2, len(order))],
			"the probe asked when the wait opens, before any timer: %v", order)
	})
}

// hangingResolveStore is a real store whose first Resolve never answers,
// as a worker killed while it records a decision: Temporal hears nothing
// of that attempt until its start-to-close passes.
type hangingResolveStore struct {
	store.Store
	once    sync.Once
	release chan struct{}
}

func (h *hangingResolveStore) Resolve(ctx context.Context, p store.ResolveParams) error {
	hang := false
	h.once.Do(func() { hang = true })
	if hang {
		<-h.release
		return errors.New("the worker died")
	}
	return h.Store.Resolve(ctx, p)
}

// A decision accepted as the worker recording it dies is applied by the
// next attempt of the Resolve activity within seconds: the update that
// carried it returns well within 40 s. Before issue 19 the Resolve
// activity's start-to-close was a minute, and the update waited for it.
func TestDecisionAppliedWithinSecondsWhenItsWorkerDies(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		h := &hangingResolveStore{Store: st, release: make(chan struct{})}
		e := newAirlineEnvWith(t, h, activity.KindEffectful, &airline{failures: 1}, awaitOpts)
		t.Cleanup(func() { close(h.release) }) // before the worker stops
		run, o := startWaiting(t, e.client, e.queue, OneBooking, "BA117", 10*time.Second, 100*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		res, err := decide(ctx, e.client, run, decision.Decision{Key: o.Key, Action: decision.ActionFree, By: "ops@acme"})
		require.NoError(t, err, "the decision is applied by the Resolve activity's next attempt")
		assert.Equal(t, decision.AppliedFreed, res.Applied)
		var seat string
		require.NoError(t, run.Get(ctx, &seat))
		assert.Equal(t, 1, e.ledger.Effects("BA117"))
	})
}

// meter is an EFFECTFUL activity whose first attempt heartbeats details
// of its own (or none), then fails with no effect; the second reads what
// the first left.
type meter struct {
	mu   sync.Mutex
	has  []bool
	seen []string
	errs []error
}

func (m *meter) Meter(ctx context.Context, req BookRequest) (string, error) {
	if sdkactivity.GetInfo(ctx).Attempt == 1 {
		if req.RequestID == "with-progress" {
			sdkactivity.RecordHeartbeat(ctx, "progress-1")
		}
		// Past the SDK's heartbeat throttle (0.8 × the 3 s heartbeat
		// timeout), so the batched heartbeat reaches the server.
		time.Sleep(2600 * time.Millisecond)
		return "", activity.NoEffect(errors.New("the meter refused"))
	}
	var prev string
	has := sdkactivity.HasHeartbeatDetails(ctx)
	err := sdkactivity.GetHeartbeatDetails(ctx, &prev)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.has, m.seen, m.errs = append(m.has, has), append(m.seen, prev), append(m.errs, err)
	return "metered", nil
}

// MeterTwice runs Meter with a heartbeat timeout, retried.
func MeterTwice(ctx workflow.Context, flight, request string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		HeartbeatTimeout:    3 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 3},
	})
	var r string
	err := workflow.ExecuteActivity(ctx, "Meter", BookRequest{Flight: flight, RequestID: request}).Get(ctx, &r)
	return r, err
}

// The dispatcher's timeout marker never reaches the body: the details a
// body heartbeats are what the next attempt reads, and a body that
// heartbeated nothing reads none, though the dispatcher heartbeated the
// marker for it.
func TestTimeoutMarkerHiddenFromTheBody(t *testing.T) {
	t.Parallel()
	st, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	e := newEnv(t, st, interceptor.Options{Lease: 2 * time.Second})
	m := &meter{}
	require.NoError(t, e.worker.Register(activity.MustDeclare(m.Meter, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
	e.worker.RegisterWorkflow(MeterTwice)
	e.start()
	var r string
	require.NoError(t, e.execute("acme", MeterTwice, &r, "BA117", "with-progress"))
	require.NoError(t, e.execute("acme", MeterTwice, &r, "BA118", "without"))
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Len(t, m.seen, 2)
	assert.True(t, m.has[0], "the body's own details are there")
	assert.NoError(t, m.errs[0])
	assert.Equal(t, "progress-1", m.seen[0], "the body's own details, unchanged")
	assert.False(t, m.has[1], "only the marker: no details for the body")
	assert.Error(t, m.errs[1], "no details to decode")
	assert.Empty(t, m.seen[1])
}
