package interceptor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// The ask of a waiting key's probe that finds the key held by a live
// holder — the body of a call Temporal timed out, still running — waits
// for that holder within the ask's time and reads the record again: the
// holder's own outcome settles the wait, instead of "held" leaving the key
// to a person until the next ask. The fault run's person rounds found
// decisions on such keys although a probe was declared.
func TestProbeActivityWaitsForALiveHolder(t *testing.T) {
	t.Parallel()
	h := newHarnessOn(t, store.SystemClock{}, func(o *interceptor.Options) {
		o.Lease = 10 * time.Second
	})
	asked := 0
	decl, err := activity.Effectful((&slowGateway{}).Charge, "flight").WithProbe(
		func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			asked++
			return activity.AnswerCannotTell(), nil
		})
	require.NoError(t, err)
	require.NoError(t, h.ic.Declare(decl))

	ctx := context.Background()
	res, err := h.mem.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "k1", Holder: "timed-out-attempt", Lease: 10 * time.Second})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = h.mem.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: "k1", Token: res.Record.Token, Outcome: []byte("booked")})
	}()

	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	reply, err := h.ic.ProbeActivity()(actx, decision.ProbeRequest{Activity: decl.Name(), Tenant: "acme", Key: "k1"})
	require.NoError(t, err)
	assert.True(t, reply.Settled, "the holder's completion settles the wait: %+v", reply)
	assert.Contains(t, reply.Detail, "completed")
	assert.Zero(t, asked, "a settled record needs no probe")
}

// aheadClock is the system's clock, ahead by d: a store whose clock runs
// ahead of the worker's.
type aheadClock struct{ d time.Duration }

func (c aheadClock) Now() time.Time { return time.Now().Add(c.d) }

// A holder whose lease runs out while the ask waits for it is gone by the
// store's clock, which the worker's may trail: the ask answers settled
// (the call runs again and takes the key over) rather than "held" because
// the record, read again by the worker's clock, still looks leased. In the
// fault run the store's wait came back a millisecond before the worker's
// clock reached the lease's end, and a person decided the key.
func TestProbeActivityHolderGoneByTheStoresClock(t *testing.T) {
	t.Parallel()
	h := newHarnessOn(t, aheadClock{d: time.Second})
	decl, err := activity.Effectful((&slowGateway{}).Charge, "flight").WithProbe(
		func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			return activity.AnswerCannotTell(), nil
		})
	require.NoError(t, err)
	require.NoError(t, h.ic.Declare(decl))

	ctx := context.Background()
	res, err := h.mem.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "k1", Holder: "killed-worker", Lease: 2 * time.Second})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)

	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	reply, err := h.ic.ProbeActivity()(actx, decision.ProbeRequest{Activity: decl.Name(), Tenant: "acme", Key: "k1"})
	require.NoError(t, err)
	assert.True(t, reply.Settled, "the holder is gone by the store's clock: %+v", reply)
	assert.Contains(t, reply.Detail, "lease ran out")
	assert.Equal(t, res.Record.Token, reply.Token)
}

// A key under which no record stands is asked about, not answered
// "settled": nothing says what the call did (its holder's dispatcher freed
// the key on a probe's "not landed", or it never claimed), and a settled
// answer ran the call again on nobody's word — and, run again and failed
// again, the call reached the workflow with its error as if the probe had
// known (issue 43 item 6). The downstream's answer is the outcome; one it
// cannot give leaves the wait to the next ask.
func TestProbeActivityAsksWhenNoRecordStands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		answer  activity.ProbeAnswer
		landing activity.Landing
	}{
		{"NotLanded", activity.AnswerNotLanded(), activity.NotLanded},
		{"Landed", activity.AnswerLanded(Booking{Flight: "BA117", Call: 1}), activity.Landed},
		{"CannotTell", activity.AnswerCannotTell(), activity.CannotTell},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessOn(t, store.SystemClock{})
			asked := 0
			decl, err := activity.Effectful((&slowGateway{}).Charge, "flight").WithProbe(
				func(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
					asked++
					assert.Equal(t, "k-gone", string(req.Key))
					return tc.answer, nil
				})
			require.NoError(t, err)
			require.NoError(t, h.ic.Declare(decl))
			_, err = h.mem.Lookup(context.Background(), store.LookupParams{Tenant: "acme", Key: "k-gone"})
			require.ErrorIs(t, err, store.ErrNotFound)

			actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			reply, err := h.ic.ProbeActivity()(actx, decision.ProbeRequest{Activity: decl.Name(), Tenant: "acme", Key: "k-gone",
				Reason: activity.ReasonTimedOut})
			require.NoError(t, err)
			assert.False(t, reply.Settled, "no record is no outcome: %+v", reply)
			assert.Equal(t, 1, asked, "the probe is asked")
			assert.Equal(t, tc.landing.String(), reply.Landing)
			assert.Contains(t, reply.Detail, "no record stands")
			assert.Zero(t, reply.Token)
			if tc.landing == activity.Landed {
				assert.NotEmpty(t, reply.Outcome, "the outcome a decision records")
			}
		})
	}
}

// A holder that is still running when the ask's time (less a margin) is
// spent leaves the answer "cannot tell", as before.
func TestProbeActivityHolderStillRunning(t *testing.T) {
	t.Parallel()
	h := newHarnessOn(t, store.SystemClock{})
	decl, err := activity.Effectful((&slowGateway{}).Charge, "flight").WithProbe(
		func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
			return activity.AnswerLanded(Booking{}), nil
		})
	require.NoError(t, err)
	require.NoError(t, h.ic.Declare(decl))

	ctx := context.Background()
	_, err = h.mem.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "k2", Holder: "still-running", Lease: time.Minute})
	require.NoError(t, err)
	actx, cancel := context.WithTimeout(ctx, 5*time.Second+500*time.Millisecond)
	defer cancel()
	reply, err := h.ic.ProbeActivity()(actx, decision.ProbeRequest{Activity: decl.Name(), Tenant: "acme", Key: "k2"})
	require.NoError(t, err)
	assert.False(t, reply.Settled)
	assert.Equal(t, activity.CannotTell.String(), reply.Landing)
	assert.Contains(t, reply.Detail, "held")
}

// The ProbeOnSchedule activity asks on the schedule it is given and stops
// at the first definite answer, saying how many asks it took; a probe that
// never can tell is asked Max times, and the last answer returned.
func TestProbeOnScheduleActivityAsksOnItsSchedule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		landsOn   int // the ask that answers landed; 0: never
		wantAsked int
		landing   string
	}{
		{"LandsOnTheThirdAsk", 3, 3, activity.Landed.String()},
		{"NeverTells", 0, 4, activity.CannotTell.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessOn(t, store.SystemClock{})
			asked := 0
			decl, err := activity.Effectful((&slowGateway{}).Charge, "flight").WithProbe(
				func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
					asked++
					if asked == tc.landsOn {
						return activity.AnswerNotLanded(), nil
					}
					return activity.AnswerCannotTell(), nil
				})
			require.NoError(t, err)
			require.NoError(t, h.ic.Declare(decl))
			ctx := context.Background()
			res, err := h.mem.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "k1", Holder: "h", Lease: 10 * time.Second})
			require.NoError(t, err)
			require.NoError(t, h.mem.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "acme", Key: "k1", Token: res.Record.Token, Reason: "lost"}))

			start := time.Now()
			reply, err := h.ic.ProbeOnScheduleActivity()(ctx, decision.ProbeOnScheduleRequest{
				Probe: decision.ProbeRequest{Activity: decl.Name(), Tenant: "acme", Key: "k1", Token: res.Record.Token},
				First: 10 * time.Millisecond, Cap: 20 * time.Millisecond, Max: 4, Now: true,
			})
			require.NoError(t, err)
			assert.Equal(t, tc.wantAsked, reply.Asked)
			assert.Equal(t, tc.wantAsked, asked)
			want := tc.landing
			if tc.landsOn > 0 {
				want = activity.NotLanded.String()
			}
			assert.Equal(t, want, reply.Landing)
			// Now: no pause before the first ask; then 10 ms, 20 ms, 20 ms.
			pauses := []time.Duration{0, 10 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond}
			assert.GreaterOrEqual(t, time.Since(start), pauses[tc.wantAsked-1], "the asks kept their schedule")
		})
	}
}
