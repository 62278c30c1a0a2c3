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

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// slowGateway is a downstream whose first request takes its time: it lands
// its effect after a while unless the caller gives up first. The test owns
// its ledger of effects; its probe answers from that ledger.
type slowGateway struct {
	mu      sync.Mutex
	effects map[string]int // key -> effects landed under it
	calls   int
	cause   chan error // why the first body's context ended
}

// Charge is declared EFFECTFUL with key argument "flight" and the
// gateway's probe.
func (g *slowGateway) Charge(ctx context.Context, req BookRequest) (Booking, error) {
	key, _ := activity.Key(ctx)
	g.mu.Lock()
	g.calls++
	call := g.calls
	g.mu.Unlock()
	if call == 1 {
		select {
		case <-ctx.Done():
			// The request is abandoned before it was sent on.
			g.cause <- context.Cause(ctx)
			return Booking{}, ctx.Err()
		case <-time.After(5 * time.Second):
			g.cause <- nil
		}
	}
	g.mu.Lock()
	g.effects[string(key)]++
	g.mu.Unlock()
	return Booking{Flight: req.Flight, Call: call, Key: string(key)}, nil
}

func (g *slowGateway) total() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.effects {
		n += c
	}
	return n
}

// probe says what the ledger holds now: true of a downstream whose callers
// stop before their lease can run out.
func (g *slowGateway) probe(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.effects[string(req.Key)] > 0 {
		return activity.AnswerLanded(Booking{Flight: "BA117", Key: string(req.Key)}), nil
	}
	return activity.AnswerNotLanded(), nil
}

// A holder whose renewals the store stops acknowledging — the store is down
// for it, but the worker is alive and its body still running — must stop
// its body before its lease can run out. Otherwise a duplicate takes the
// key over once the lease has run out, its probe finds nothing landed (the
// body's request is still on its way), the key is freed, the retry charges,
// and then the first body lands too: two effects under one key. The fault
// run found exactly that (a store restart while a slow charge ran).
func TestLapsedLeaseStopsBodyBeforeTakeover(t *testing.T) {
	t.Parallel()
	h := newHarnessOn(t, store.SystemClock{}, func(o *interceptor.Options) {
		o.Lease = 600 * time.Millisecond
	})
	g := &slowGateway{effects: map[string]int{}, cause: make(chan error, 1)}
	decl, err := activity.Effectful(g.Charge, "flight").WithProbe(g.probe)
	require.NoError(t, err)
	require.NoError(t, h.ic.Declare(decl))
	env := func() *testsuite.TestActivityEnvironment {
		e := h.activityEnv(t, "acme")
		e.RegisterActivity(g.Charge)
		return e
	}
	claimed := h.rec.next(interceptor.EventClaimed)
	lapsed := h.rec.next(interceptor.EventLeaseLapsed)
	req := BookRequest{Flight: "BA117"}

	first := start(env(), g.Charge, req)
	receive(t, claimed, "the first claim")
	// From now on no renewal reaches the store; every other call does.
	h.faults.setDown("Renew", true)

	// A duplicate waits for the holder; it takes the key over if the lease
	// runs out (and asks the probe), or claims it once the holder has
	// freed it.
	second := start(env(), g.Charge, req)

	cause := receive(t, g.cause, "the first body to end")
	o := receive(t, first, "the first execution")
	receive(t, second, "the duplicate")

	// The retry runs the body once more, or answers from the record.
	h.faults.setDown("Renew", false)
	_, err = book(env(), g.Charge, BookRequest{Flight: "BA117", RequestID: "retry"})
	require.NoError(t, err)
	assert.Equal(t, 1, g.total(), "one effect under the key")

	require.ErrorIs(t, cause, interceptor.ErrLeaseLapsed, "the first body was stopped before its lease could run out")
	require.Error(t, o.err, "the first body was stopped")
	e := receive(t, lapsed, "the lease_lapsed event")
	assert.ErrorIs(t, e.Err, interceptor.ErrLeaseLapsed)
}

// A lapsed holder with no probe leaves the key indeterminate (holder_lost,
// body entered), never free: its body may have sent its request.
func TestLapsedLeaseIndeterminate(t *testing.T) {
	t.Parallel()
	h := newHarnessOn(t, store.SystemClock{}, func(o *interceptor.Options) {
		o.Lease = 300 * time.Millisecond
	})
	started := make(chan struct{})
	h.acts.on("Book", func(ctx context.Context, _ int, _ BookRequest) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	})
	env := h.activityEnv(t, "acme")
	done := start(env, h.acts.Book, BookRequest{Flight: "BA117"})
	receive(t, started, "the body to start")
	h.faults.setDown("Renew", true)
	o := receive(t, done, "the execution")
	ind := requireIndeterminate(t, o.err, activity.ReasonHolderLost, true)
	assert.Contains(t, ind.Cause, interceptor.ErrLeaseLapsed.Error())
	rec, err := h.lookup(t, "acme", ind.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State, "the claim is marked: its holder may have had its effect")

	// An IDEMPOTENT body stopped the same way frees its key for its retry.
	h.acts.on("Reserve", func(ctx context.Context, call int, _ BookRequest) error {
		if call == 1 {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	})
	_, err = book(env, h.acts.Reserve, BookRequest{Flight: "LH400"})
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		assert.False(t, appErr.NonRetryable(), "an IDEMPOTENT body stopped is retried")
	}
	h.faults.setDown("Renew", false)
	b, err := book(env, h.acts.Reserve, BookRequest{Flight: "LH400"})
	require.NoError(t, err, "its key was freed for the retry")
	assert.Equal(t, 2, b.Call)
}
