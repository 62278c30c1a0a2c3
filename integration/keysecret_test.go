package integration

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// keyedAgainSignal lets BookWaitBookAgain make its second call.
const keyedAgainSignal = "book-again"

// BookWaitBookAgain books flight, waits for the book-again signal, and
// books the same flight again: the second call has the first one's key,
// so it answers from the record — as long as both are derived under one
// secret. A redeploy between the two is what the tests put there.
func BookWaitBookAgain(ctx workflow.Context, flight string) ([]string, error) {
	ctx = activityOptions(ctx, 10*time.Second, 100*time.Millisecond)
	req := BookRequest{Flight: flight, RequestID: "req-" + workflow.GetInfo(ctx).WorkflowExecution.RunID}
	var first, second string
	if err := workflow.ExecuteActivity(ctx, "Book", req).Get(ctx, &first); err != nil {
		return nil, err
	}
	workflow.GetSignalChannel(ctx, keyedAgainSignal).Receive(ctx, nil)
	if err := workflow.ExecuteActivity(ctx, "Book", req).Get(ctx, &second); err != nil {
		return nil, err
	}
	return []string{first, second}, nil
}

// testSecret returns the secret of generation gen, its bytes all fill.
func testSecret(t testing.TB, gen int, fill byte) *keyspace.Secret {
	t.Helper()
	s, err := keyspace.NewSecret(gen, bytes.Repeat([]byte{fill}, keyspace.MinSecretLength))
	require.NoError(t, err)
	return s
}

// keyedWorker starts a worker on queue hosting BookWaitBookAgain and a's
// Book (EFFECTFUL on the flight) with opts on st; the returned function
// stops it. Workers started one after another on one queue share a's
// ledger, as redeployed workers share the airline.
func keyedWorker(t *testing.T, c client.Client, queue string, st store.Store, a *airline, opts interceptor.Options, events *eventLog) (stop func()) {
	t.Helper()
	opts.Store, opts.Observer, opts.Lease = st, events, 2*time.Second
	w, err := worker.New(c, queue, worker.Options{Worker: workerOptions, Idempotency: opts, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	require.NoError(t, w.Register(activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})))
	w.RegisterWorkflow(BookWaitBookAgain)
	w.RegisterWorkflow(BookThenWait)
	require.NoError(t, w.Start())
	var once sync.Once
	stop = func() { once.Do(w.Stop) }
	t.Cleanup(stop)
	return stop
}

// keyedRig is what the keyed-derivation tests share: a client with the
// plugin, a task queue, a ledger and its airline, the events, secrets of
// generations 1 and 2, and a context under tenant acme.
type keyedRig struct {
	c      client.Client
	queue  string
	ledger *Ledger
	a      *airline
	events *eventLog
	s1, s2 *keyspace.Secret
	ctx    context.Context
}

func newKeyedRig(t *testing.T, queue string) keyedRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(interceptor.WithTenant(context.Background(), "acme"), 3*time.Minute)
	t.Cleanup(cancel)
	ledger := newLedger()
	return keyedRig{
		c:      newClient(server, worker.ClientOptions(client.Options{}, zaptest.NewLogger(t))),
		queue:  testenv.UniqueName(queue),
		ledger: ledger,
		a:      &airline{ledger: ledger},
		events: &eventLog{},
		s1:     testSecret(t, 1, 0x11),
		s2:     testSecret(t, 2, 0x22),
		ctx:    ctx,
	}
}

// Keyed derivation switched on and a secret rotated, each by a redeploy,
// with workflows running across both:
//
//   - W0 made its first call with no secret configured; after the switch
//     its second call still derives the unkeyed key and answers from the
//     first call's record;
//   - W1 was keyed under generation 1; after the rotation to generation 2
//     (1 kept in KeySecrets) its second call derives under 1 again;
//   - W2, keyed under 2, meets a worker redeployed without any secret (a
//     rolled-back configuration): its call fails with the retryable
//     IdempotencyUnknownKeySecret and runs nothing, then completes from
//     its record once a worker holding generation 2 is back.
//
// One booking per workflow, whatever the configuration did; the records
// are under the keys each generation derives (v1:, then k1: under 1, then
// k1: under 2), and no record holds an unkeyed key of a keyed call.
func TestKeySecretSwitchAndRotation(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		r := newKeyedRig(t, "tq-keyed")
		c, queue, ledger, a, events, s1, s2 := r.c, r.queue, r.ledger, r.a, r.events, r.s1, r.s2
		decl := activity.MustDeclare(a.Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})
		ctx := r.ctx

		start := func(flight string) client.WorkflowRun {
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue}, BookWaitBookAgain, flight)
			require.NoError(t, err)
			require.Eventually(t, func() bool { return ledger.Effects(flight) == 1 }, 30*time.Second, 20*time.Millisecond, "%s booked", flight)
			return run
		}
		finish := func(run client.WorkflowRun, flight string) {
			require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), keyedAgainSignal, nil))
			var got []string
			require.NoError(t, run.Get(ctx, &got))
			require.Len(t, got, 2)
			assert.Equal(t, got[0], got[1], "%s: the second call answered from the first one's record", flight)
			assert.Equal(t, 1, ledger.Effects(flight), "%s booked twice", flight)
		}
		keyOf := func(secret *keyspace.Secret, run client.WorkflowRun, flight string) string {
			k, err := decl.KeyUnder(secret, "acme", run.GetRunID(), []any{BookRequest{Flight: flight}})
			require.NoError(t, err)
			return string(k)
		}

		// No secret: W0 is unkeyed for its life.
		stop := keyedWorker(t, c, queue, st, a, interceptor.Options{}, events)
		w0 := start("W0")
		stop()

		// Switched on under generation 1.
		stop = keyedWorker(t, c, queue, st, a, interceptor.Options{KeySecret: s1}, events)
		finish(w0, "W0")
		w1 := start("W1")
		stop()

		// Rotated to generation 2, generation 1 kept for W1.
		stop = keyedWorker(t, c, queue, st, a, interceptor.Options{KeySecret: s2, KeySecrets: []*keyspace.Secret{s1}}, events)
		finish(w1, "W1")
		w2 := start("W2")
		stop()

		// A worker that holds no secret runs none of W2's calls.
		misconfigured := events.count(interceptor.EventMisconfigured)
		stop = keyedWorker(t, c, queue, st, a, interceptor.Options{}, events)
		require.NoError(t, c.SignalWorkflow(ctx, w2.GetID(), w2.GetRunID(), keyedAgainSignal, nil))
		require.Eventually(t, func() bool { return events.count(interceptor.EventMisconfigured) > misconfigured }, 30*time.Second, 20*time.Millisecond,
			"the call keyed under generation 2 was refused")
		stop()
		assert.Equal(t, 1, ledger.Effects("W2"), "a worker without the secret booked W2 again")
		assert.Equal(t, 1, ledger.Calls("W2"), "a worker without the secret entered W2's body")

		// Generation 2 back: W2's retry answers from its record.
		keyedWorker(t, c, queue, st, a, interceptor.Options{KeySecret: s2}, events)
		var got []string
		require.NoError(t, w2.Get(ctx, &got))
		require.Len(t, got, 2)
		assert.Equal(t, got[0], got[1])
		assert.Equal(t, 1, ledger.Effects("W2"), "W2 booked twice")

		page, err := st.List(ctx, store.ListParams{Tenant: "acme"})
		require.NoError(t, err)
		keys := map[string]bool{}
		for _, r := range page.Records {
			keys[r.Key] = true
		}
		// Besides the calls' records, one per generation binding it to
		// its bytes in the tenant (kf1:<generation>).
		want := map[string]bool{keyOf(nil, w0, "W0"): true, keyOf(s1, w1, "W1"): true, keyOf(s2, w2, "W2"): true,
			"kf1:1": true, "kf1:2": true}
		assert.Equal(t, want, keys, "the records are not under the keys each workflow's generation derives")
		for k := range want {
			if k != keyOf(nil, w0, "W0") && !strings.HasPrefix(k, "kf1:") {
				assert.True(t, keyspace.Key(k).Keyed(), "%s is not keyed", k)
			}
		}
	})
}

// A workflow reset to before its first call after keyed derivation was
// switched on (a) or its secret rotated (b): the reset run records the
// generation in force now, and its call, derived under it, would find no
// record and book again. It finds the record of the run it was reset from
// under the derivation that run used. One booking each, on every store.
func TestKeySecretAcrossAReset(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		r := newKeyedRig(t, "tq-keyed-reset")
		c, queue, ledger, a, events, s1, s2 := r.c, r.queue, r.ledger, r.a, r.events, r.s1, r.s2
		ctx := r.ctx

		for _, tc := range []struct {
			flight        string
			before, after interceptor.Options
		}{
			{"R0", interceptor.Options{}, interceptor.Options{KeySecret: s1}},
			{"R1", interceptor.Options{KeySecret: s1}, interceptor.Options{KeySecret: s2, KeySecrets: []*keyspace.Secret{s1}}},
		} {
			stop := keyedWorker(t, c, queue, st, a, tc.before, events)
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue}, BookThenWait, tc.flight)
			require.NoError(t, err)
			require.Eventually(t, func() bool { return ledger.Effects(tc.flight) == 1 }, 30*time.Second, 20*time.Millisecond, "%s booked", tc.flight)
			stop()

			stop = keyedWorker(t, c, queue, st, a, tc.after, events)
			deduplicated := events.count(interceptor.EventDeduplicated)
			reset := resetToFirstTask(ctx, t, c, run)
			require.Eventually(t, func() bool {
				return events.count(interceptor.EventDeduplicated) > deduplicated || ledger.Effects(tc.flight) > 1
			}, 30*time.Second, 20*time.Millisecond, "%s: the reset run's call ended", tc.flight)
			require.NoError(t, c.SignalWorkflow(ctx, reset.GetID(), reset.GetRunID(), resetGoSignal, nil))
			var got string
			require.NoError(t, reset.Get(ctx, &got))
			assert.Contains(t, got, "seat 1 on "+tc.flight)
			assert.Equal(t, 1, ledger.Effects(tc.flight), "%s: the reset booked a second seat", tc.flight)
			stop()
		}
	})
}

// Under ScopeWorkflow, a later run of the same workflow ID (here started
// again once the first completed; a continue-as-new or a workflow retry
// alike) records the generation in force when it first calls: after a
// rotation it finds the first run's record under the first run's
// derivation instead of booking again.
func TestKeySecretRotationUnderScopeWorkflow(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		r := newKeyedRig(t, "tq-keyed-wfscope")
		c, queue, ledger, a, events, s1, s2 := r.c, r.queue, r.ledger, r.a, r.events, r.s1, r.s2
		ctx := r.ctx
		id := testenv.UniqueName("wf")
		for _, opts := range []interceptor.Options{
			{Scope: interceptor.ScopeWorkflow, KeySecret: s1},
			{Scope: interceptor.ScopeWorkflow, KeySecret: s2, KeySecrets: []*keyspace.Secret{s1}},
		} {
			stop := keyedWorker(t, c, queue, st, a, opts, events)
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, BookThenWait, "W1")
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				return events.count(interceptor.EventCompleted)+events.count(interceptor.EventDeduplicated) >= 1 && ledger.Calls("W1") >= 1
			}, 30*time.Second, 20*time.Millisecond)
			require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), resetGoSignal, nil))
			var got string
			require.NoError(t, run.Get(ctx, &got))
			assert.Contains(t, got, "seat 1 on W1")
			stop()
		}
		assert.Equal(t, 1, ledger.Effects("W1"), "the run after the rotation booked again")
		assert.Equal(t, 1, events.count(interceptor.EventDeduplicated), "the second run answered from the first one's record")
	})
}

// A new user's secret file gained a trailing newline on one worker: both
// hold generation 1, with different bytes. A workflow books on the first
// worker; it is reset to before its first call onto the other, alone on
// the queue. The reset run records generation 1 again, and the other
// worker, whose bytes the store's record of generation 1 does not name,
// runs nothing (a misconfigured event, a retryable error) instead of
// deriving another key and charging again; once the first worker is back,
// the reset run answers from the record. One booking, every store.
func TestKeySecretBytesDisagreeAcrossAReset(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store.Store) {
		r := newKeyedRig(t, "tq-keyed-newline")
		c, queue, ledger, a, events, s1 := r.c, r.queue, r.ledger, r.a, r.events, r.s1
		ctx := r.ctx
		newline, err := keyspace.NewSecret(1, append(bytes.Repeat([]byte{0x11}, keyspace.MinSecretLength), '\n'))
		require.NoError(t, err)

		stop := keyedWorker(t, c, queue, st, a, interceptor.Options{KeySecret: s1}, events)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName("wf"), TaskQueue: queue}, BookThenWait, "N1")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return ledger.Effects("N1") == 1 }, 30*time.Second, 20*time.Millisecond, "N1 booked")
		stop()

		stop = keyedWorker(t, c, queue, st, a, interceptor.Options{KeySecret: newline}, events)
		misconfigured := events.count(interceptor.EventMisconfigured)
		reset := resetToFirstTask(ctx, t, c, run)
		require.Eventually(t, func() bool {
			return events.count(interceptor.EventMisconfigured) > misconfigured || ledger.Effects("N1") > 1
		}, 30*time.Second, 20*time.Millisecond, "the reset run's call ended on the worker with the other bytes")
		stop()
		assert.Equal(t, 1, ledger.Effects("N1"), "the worker whose secret gained a newline charged again")

		keyedWorker(t, c, queue, st, a, interceptor.Options{KeySecret: s1}, events)
		require.NoError(t, c.SignalWorkflow(ctx, reset.GetID(), reset.GetRunID(), resetGoSignal, nil))
		var got string
		require.NoError(t, reset.Get(ctx, &got))
		assert.Contains(t, got, "seat 1 on N1")
		assert.Equal(t, 1, ledger.Effects("N1"), "the reset booked a second seat")
	})
}
