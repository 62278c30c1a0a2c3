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
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// scriptedAirline is a downstream whose n-th call (from 1) does what
// script[n-1] says (the last entry for every later call): hold a while,
// ignoring its context, then book or not, then answer or fail. Its probe
// answers from its bookings.
type scriptedAirline struct {
	ledger *Ledger
	script []step

	mu       sync.Mutex
	bookings map[keyspace.Key]string
}

// step is one call of a scriptedAirline.
type step struct {
	hold time.Duration
	book bool
	fail bool
}

func (a *scriptedAirline) Book(ctx context.Context, req BookRequest) (string, error) {
	call := a.ledger.call(req.Flight)
	s := a.script[min(call, len(a.script))-1]
	time.Sleep(s.hold)
	if !s.book {
		return "", fmt.Errorf("airline: gateway timeout on call %d, nothing booked", call)
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
	if s.fail {
		return "", fmt.Errorf("airline: gateway timeout on call %d, after the booking", call)
	}
	return seat, nil
}

func (a *scriptedAirline) Probe(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if seat, ok := a.bookings[req.Key]; ok {
		return activity.AnswerLanded(seat), nil
	}
	return activity.AnswerNotLanded(), nil
}

func newScriptedEnv(t *testing.T, st store.Store, a *scriptedAirline, opts interceptor.Options) *env {
	t.Helper()
	e := newEnv(t, st, opts)
	a.ledger = e.ledger
	require.NoError(t, e.worker.Register(activity.MustDeclare(a.Book,
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, Probe: a.Probe})))
	e.worker.RegisterWorkflow(BookAttempts)
	e.start()
	return e
}

// rerunOpts route indeterminate outcomes to a person and make a call the
// probe's answer ran again, failed again, wait once more.
var rerunOpts = interceptor.Options{Lease: 2 * time.Second, AwaitDecision: true, WaitAfterProbeRerun: true}

// landsOnTheRerun: the first run outlives its attempt and books nothing
// (its dispatcher, late, hears "not landed" and frees the key); the second
// outlives its attempt too, and books; any later one books at once.
// neverLands: every run outlives its attempt and books nothing.
var (
	landsOnTheRerun = []step{
		{hold: 2500 * time.Millisecond},
		{hold: 2500 * time.Millisecond, book: true},
		{book: true},
	}
	neverLands = []step{{hold: 2500 * time.Millisecond}}
)

// bookOnceAttempt runs BookAttempts with a 1 s start-to-close and one
// attempt under tenant acme, and returns its seat and error.
func bookOnceAttempt(t *testing.T, e *env, flight string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 90*time.Second)
	defer cancel()
	run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue},
		BookAttempts, flight, time.Second, int32(1))
	require.NoError(t, err)
	var seat string
	err = run.Get(ctx, &seat)
	return seat, err
}

// A call the probe's answer ran again that fails again waits once more:
// what the probe answered was about the earlier run, not the one it caused.
// The first run outlives its attempt and books nothing (its dispatcher,
// late, hears "not landed" and frees the key); the probe, asked as the
// wait opens, finds no record and answers not landed; the call runs again,
// outlives its attempt again, and books. Before issue 43 item 6 the second
// timeout reached the workflow (IndeterminateOutcome timed_out) the moment
// it came, while the booking landed two seconds later; now the wait on it
// finds the holder's booking and the call answers it: one booking, and the
// body runs twice (the third run answers from the record).
func TestProbeRerunThatFailsAgainWaits(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newScriptedEnv(t, st, &scriptedAirline{script: landsOnTheRerun}, rerunOpts)
		seat, err := bookOnceAttempt(t, e, "BA117")
		require.NoError(t, err, "the call answers the booking its run again made")
		assert.True(t, strings.HasPrefix(seat, "seat 1 on BA117"), seat)
		assert.Equal(t, 1, e.ledger.Effects("BA117"), "one booking")
		assert.Equal(t, 2, e.ledger.Calls("BA117"), "the body ran twice; the third run answered from the record")
	})
}

// With Options.WaitAfterProbeRerun off (the default until every worker
// runs a release that has it), the call fails as before: the second
// timeout reaches the workflow, and the booking lands after it.
func TestProbeRerunThatFailsAgainOffAsBefore(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newScriptedEnv(t, st, &scriptedAirline{script: landsOnTheRerun}, awaitOpts)
		_, err := bookOnceAttempt(t, e, "BA118")
		requireTimedOut(t, err)
		assert.Equal(t, 2, e.ledger.Calls("BA118"))
		require.Eventually(t, func() bool { return e.ledger.Effects("BA118") == 1 }, 10*time.Second, 50*time.Millisecond,
			"the second run books after the workflow heard its timeout")
	})
}

// A downstream that fails every call, nothing landing, is run twice and
// then reaches the workflow — not without end: the probe answers, on the
// wait after the run it caused, that nothing landed, and the workflow gets
// the retryable IdempotencyEffectNotLanded (the key is free), not an
// indeterminate outcome.
func TestProbeRerunThatKeepsFailingReachesTheWorkflow(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newScriptedEnv(t, st, &scriptedAirline{script: neverLands}, rerunOpts)
		_, err := bookOnceAttempt(t, e, "BA119")
		require.Error(t, err)
		_, indeterminate := activity.AsIndeterminate(err)
		assert.False(t, indeterminate, "nothing landed: no outcome is unknown: %v", err)
		var appErr *temporal.ApplicationError
		require.Truef(t, errors.As(err, &appErr), "typed: %v", err)
		assert.Equal(t, decision.ErrorTypeNotLanded, appErr.Type())
		assert.Equal(t, 2, e.ledger.Calls("BA119"), "run once again, not without end")
		assert.Zero(t, e.ledger.Effects("BA119"))
	})
}

// TestRecordProbeRerunHistories records the runs of ProbeRerunChangeID
// (gen10-, run alone with -run 'TestRecordProbeRerunHistories'): a call the
// probe ran again that fails again waiting once more and answering the
// booking its run made (on-), the same with nothing landing reaching the
// workflow as not landed (on-), and, with the option off, the error handed
// on as before (off-: the previous release replays it).
func TestRecordProbeRerunHistories(t *testing.T) {
	prefix := recordPrefix(t)
	for _, sc := range []struct {
		name   string
		opts   interceptor.Options
		script []step
	}{
		{"on-probe-rerun-waits", rerunOpts, landsOnTheRerun},
		{"on-probe-rerun-keeps-failing", rerunOpts, neverLands},
		{"on-probe-rerun-off", awaitOpts, landsOnTheRerun},
	} {
		t.Run(sc.name, func(t *testing.T) {
			mem, err := store.NewMemory(store.MemoryOptions{})
			require.NoError(t, err)
			e := newScriptedEnv(t, mem, &scriptedAirline{script: sc.script}, sc.opts)
			ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 90*time.Second)
			defer cancel()
			run, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: e.queue},
				BookAttempts, "BA117", time.Second, int32(1))
			require.NoError(t, err)
			_ = run.Get(ctx, nil) // the history, not the result, is what is kept
			writeHistory(ctx, t, e.client, run, prefix+sc.name)
		})
	}
}

// requireTimedOut requires err to be the timed_out indeterminate outcome.
func requireTimedOut(t *testing.T, err error) {
	t.Helper()
	o, ok := activity.AsIndeterminate(err)
	require.Truef(t, ok, "indeterminate: %v", err)
	require.Equal(t, activity.ReasonTimedOut, o.Reason)
}
