package interceptor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

type outcome struct {
	booking Booking
	err     error
}

// start executes fn in env on a goroutine of its own.
func start(env *testsuite.TestActivityEnvironment, fn any, req BookRequest) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		b, err := book(env, fn, req)
		ch <- outcome{b, err}
	}()
	return ch
}

// preclaim takes the key of name(req), as activities in env derive it, for
// another holder, as a worker elsewhere would.
func (h *harness) preclaim(t *testing.T, env *testsuite.TestActivityEnvironment, name string, req BookRequest, lease time.Duration) (key string, token int64) {
	t.Helper()
	runID, _ := h.runIDs(t, env)
	key = h.key(t, name, "acme", runID, req)
	res, err := h.mem.Claim(context.Background(), store.ClaimParams{Tenant: "acme", Key: key, Holder: "worker-elsewhere", Lease: lease})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	return key, res.Record.Token
}

func TestConcurrentDuplicateWaits(t *testing.T) {
	t.Parallel()
	for _, kc := range dedupKinds {
		t.Run(kc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			started, proceed := make(chan struct{}), make(chan struct{})
			h.acts.on(kc.act, func(_ context.Context, call int, _ BookRequest) error {
				if call == 1 {
					close(started)
					<-proceed
				}
				return nil
			})
			env1 := h.activityEnv(t, "acme")
			env2 := h.activityEnv(t, "acme")
			h.runIDs(t, env2) // a different activity ID from env1's
			heartbeats := make(chan struct{}, 1)
			env2.SetOnActivityHeartbeatListener(func(*sdkactivity.Info, converter.EncodedValues) {
				select {
				case heartbeats <- struct{}{}:
				default:
				}
			})

			first := start(env1, kc.fn(h), BookRequest{Flight: "BA117", RequestID: "a"})
			receive(t, started, "the first body to start")
			waiting := h.rec.next(interceptor.EventWaiting)
			second := start(env2, kc.fn(h), BookRequest{Flight: "BA117", RequestID: "b"})
			receive(t, waiting, "the duplicate to wait")
			receive(t, heartbeats, "the waiting duplicate to heartbeat")
			close(proceed)

			o1, o2 := receive(t, first, "the first call"), receive(t, second, "the duplicate")
			require.NoError(t, o1.err)
			require.NoError(t, o2.err)
			assert.Equal(t, o1.booking, o2.booking, "the duplicate returns the first call's result")
			assert.Equal(t, 1, h.acts.ledger.count(kc.act), "one side effect")
			assert.Equal(t, 1, h.rec.count(interceptor.EventDeduplicated))
			assert.Equal(t, 1, h.rec.count(interceptor.EventClaimed))
		})
	}
}

func TestWaitOutcomeLands(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	env := h.activityEnv(t, "acme")
	req := BookRequest{Flight: "BA117"}
	key, token := h.preclaim(t, env, "Book", req, time.Minute)

	waiting := h.rec.next(interceptor.EventWaiting)
	done := start(env, h.acts.Book, req)
	receive(t, waiting, "the execution to wait")

	want := Booking{Flight: "BA117", Call: 99, Key: "elsewhere"}
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(want)
	require.NoError(t, err)
	raw, err := proto.Marshal(payloads)
	require.NoError(t, err)
	require.NoError(t, h.mem.Complete(context.Background(), store.CompleteParams{Tenant: "acme", Key: key, Token: token, Outcome: raw}))

	o := receive(t, done, "the waiting execution")
	require.NoError(t, o.err)
	assert.Equal(t, want, o.booking, "the holder's recorded outcome is returned")
	assert.Zero(t, h.acts.ledger.total(), "the body is not entered")
	assert.Equal(t, []interceptor.EventKind{interceptor.EventWaiting, interceptor.EventWaited, interceptor.EventDeduplicated}, h.rec.kinds())
}

func TestWaitHolderReleased(t *testing.T) {
	t.Parallel()
	for _, kc := range dedupKinds {
		t.Run(kc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			env := h.activityEnv(t, "acme")
			req := BookRequest{Flight: "BA117"}
			key, token := h.preclaim(t, env, kc.act, req, time.Minute)

			waiting := h.rec.next(interceptor.EventWaiting)
			done := start(env, kc.fn(h), req)
			receive(t, waiting, "the execution to wait")
			require.NoError(t, h.mem.Release(context.Background(), store.ReleaseParams{Tenant: "acme", Key: key, Token: token}))

			o := receive(t, done, "the waiting execution")
			require.NoError(t, o.err)
			assert.Equal(t, 1, o.booking.Call, "a released key is claimed again and the body runs")
			assert.Equal(t, []interceptor.EventKind{interceptor.EventWaiting, interceptor.EventWaited, interceptor.EventClaimed, interceptor.EventCompleted}, h.rec.kinds())
		})
	}
}

func TestWaitHolderIndeterminate(t *testing.T) {
	t.Parallel()
	for _, kc := range dedupKinds {
		t.Run(kc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			env := h.activityEnv(t, "acme")
			req := BookRequest{Flight: "BA117"}
			key, token := h.preclaim(t, env, kc.act, req, time.Minute)

			waiting := h.rec.next(interceptor.EventWaiting)
			done := start(env, kc.fn(h), req)
			receive(t, waiting, "the execution to wait")
			require.NoError(t, h.mem.MarkIndeterminate(context.Background(), store.MarkIndeterminateParams{Tenant: "acme", Key: key, Token: token, Reason: "timed out after sending"}))

			o := receive(t, done, "the waiting execution")
			ind := requireIndeterminate(t, o.err, activity.ReasonRecorded, false)
			assert.Equal(t, key, ind.Key)
			assert.Contains(t, ind.Cause, "timed out after sending")
			assert.Zero(t, h.acts.ledger.total())
		})
	}
}

func TestHolderLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// whileWaiting moves the clock past the lease once the execution
		// waits; otherwise the lease has run out before it starts.
		whileWaiting bool
	}{
		{"LeaseRanOutBefore", false},
		{"LeaseRunsOutWhileWaiting", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			t.Run("Effectful", func(t *testing.T) {
				t.Parallel()
				h := newHarness(t)
				env := h.activityEnv(t, "acme")
				req := BookRequest{Flight: "BA117"}
				key, _ := h.preclaim(t, env, "Book", req, time.Second)
				done := h.runPastLease(t, env, h.acts.Book, req, tt.whileWaiting)

				o := receive(t, done, "the execution")
				ind := requireIndeterminate(t, o.err, activity.ReasonHolderLost, false)
				assert.True(t, ind.EffectMayHaveLanded, "the lost holder's effect may have landed")
				assert.Equal(t, key, ind.Key)
				assert.Contains(t, ind.Cause, "worker-elsewhere", "the message names the lost holder")
				assert.Zero(t, h.acts.ledger.total(), "the body is not entered: the lost holder's effect may have landed")
				rec, err := h.lookup(t, "acme", key)
				require.NoError(t, err)
				assert.Equal(t, store.StateIndeterminate, rec.State, "the key is now indeterminate")
				assert.Contains(t, rec.Reason, string(activity.ReasonHolderLost))
				assert.Zero(t, h.rec.count(interceptor.EventTakenOver))

				_, err = book(env, h.acts.Book, req)
				again := requireIndeterminate(t, err, activity.ReasonRecorded, false)
				assert.True(t, again.EffectMayHaveLanded, "a recorded indeterminate key may hold an effect")
			})
			t.Run("Idempotent", func(t *testing.T) {
				t.Parallel()
				h := newHarness(t)
				env := h.activityEnv(t, "acme")
				req := BookRequest{Flight: "BA117"}
				key, _ := h.preclaim(t, env, "Reserve", req, time.Second)
				done := h.runPastLease(t, env, h.acts.Reserve, req, tt.whileWaiting)

				o := receive(t, done, "the execution")
				require.NoError(t, o.err)
				assert.Equal(t, 1, o.booking.Call, "IDEMPOTENT takes over and runs the body")
				assert.Equal(t, 1, h.rec.count(interceptor.EventTakenOver))
				rec, err := h.lookup(t, "acme", key)
				require.NoError(t, err)
				assert.Equal(t, store.StateCompleted, rec.State)
			})
		})
	}
}

// runPastLease starts fn and moves the store's clock past the pre-claimed
// lease, before the execution starts or once it waits.
func (h *harness) runPastLease(t *testing.T, env *testsuite.TestActivityEnvironment, fn any, req BookRequest, whileWaiting bool) <-chan outcome {
	t.Helper()
	if !whileWaiting {
		h.clock.Advance(2 * time.Second)
		done := start(env, fn, req)
		o := receive(t, done, "the execution")
		assert.Zero(t, h.rec.count(interceptor.EventWaiting), "a lost holder is not waited for")
		ch := make(chan outcome, 1)
		ch <- o
		return ch
	}
	waiting := h.rec.next(interceptor.EventWaiting)
	done := start(env, fn, req)
	receive(t, waiting, "the execution to wait")
	h.clock.Advance(2 * time.Second)
	return done
}

func TestLeaseRenewedWhileBodyRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	started, proceed := make(chan struct{}), make(chan struct{})
	h.acts.on("Book", func(context.Context, int, BookRequest) error {
		close(started)
		<-proceed
		return nil
	})
	env := h.activityEnv(t, "acme")
	claimed := h.rec.next(interceptor.EventClaimed)
	done := start(env, h.acts.Book, BookRequest{Flight: "BA117"})
	key := receive(t, claimed, "the claim").Key
	receive(t, started, "the body to start")

	rec, err := h.lookup(t, "acme", key)
	require.NoError(t, err)
	require.Equal(t, t0.Add(300*time.Millisecond), rec.LeaseUntil, "the first lease")
	h.clock.Advance(time.Hour)
	require.Eventually(t, func() bool {
		rec, err := h.lookup(t, "acme", key)
		return err == nil && rec.LeaseUntil.After(t0.Add(time.Hour))
	}, 20*time.Second, 10*time.Millisecond, "the dispatcher renews the lease while the body runs")
	close(proceed)

	o := receive(t, done, "the execution")
	require.NoError(t, o.err)
	rec, err = h.lookup(t, "acme", key)
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
}
