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

// A body whose claim was taken over must stop at once: the renewer's
// ErrNotHolder cancels the body's context, so a takeover never overlaps the
// body it replaced for longer than the body takes to notice.
func TestSupersededBodyCancelled(t *testing.T) {
	t.Parallel()
	for _, k := range dedupKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			testSupersededBodyCancelled(t, k)
		})
	}
}

func testSupersededBodyCancelled(t *testing.T, k kindCase) {
	h := newHarness(t)
	started, stopped := make(chan struct{}), make(chan error, 1)
	h.acts.on(k.act, func(ctx context.Context, call int, _ BookRequest) error {
		if call > 1 {
			return nil
		}
		close(started)
		select {
		case <-ctx.Done():
			stopped <- context.Cause(ctx)
			return ctx.Err()
		case <-time.After(20 * time.Second):
			stopped <- nil
			return nil
		}
	})
	env := h.activityEnv(t, "acme")
	claimed := h.rec.next(interceptor.EventClaimed)
	superseded := h.rec.next(interceptor.EventSuperseded)
	done := start(env, k.fn(h), BookRequest{Flight: "BA117"})
	key := receive(t, claimed, "the claim").Key
	receive(t, started, "the body to start")

	// The holder's renewals fail long enough for its lease to run out, and
	// another caller takes the key over.
	h.faults.setDown("Renew", true)
	rec, err := h.lookup(t, "acme", key)
	require.NoError(t, err)
	h.clock.Advance(time.Minute)
	res, err := h.mem.Claim(context.Background(), store.ClaimParams{
		Tenant: "acme", Key: key, Holder: "other", Lease: time.Hour, Supersede: rec.Token,
	})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status, "the takeover")
	h.faults.setDown("Renew", false)

	cause := receive(t, stopped, "the superseded body to stop")
	require.ErrorIs(t, cause, interceptor.ErrSuperseded, "the body's context ends with ErrSuperseded")
	e := receive(t, superseded, "the superseded event")
	assert.Equal(t, key, e.Key)
	assert.ErrorIs(t, e.Err, store.ErrNotHolder)
	o := receive(t, done, "the execution")
	if k.act == "Book" {
		// An EFFECTFUL body stopped half-way may have had its effect.
		requireIndeterminate(t, o.err, activity.ReasonHolderLost, true)
		assert.False(t, e.Final, "the call ends indeterminate")
	} else {
		assert.True(t, e.Final, "the call's end")
		appErr := requireApplicationError(t, o.err, decision.ErrorTypeSuperseded)
		assert.False(t, appErr.NonRetryable(), "a retry waits for the new holder")
	}
	assert.Equal(t, 1, h.acts.ledger.count(k.act), "the body ran once")
	got, err := h.lookup(t, "acme", key)
	require.NoError(t, err)
	assert.Equal(t, res.Record.Token, got.Token, "the new holder keeps the key")
	assert.Equal(t, store.StatePending, got.State, "the superseded body recorded nothing")
}
