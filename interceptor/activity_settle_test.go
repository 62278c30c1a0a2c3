package interceptor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// settleWithin bounds how long a test waits for a background write once
// the store answers again.
const settleWithin = 10 * time.Second

// requireState waits until the key's record is in state.
func requireState(t *testing.T, h *harness, key string, state store.State) {
	t.Helper()
	require.Eventually(t, func() bool {
		rec, err := h.lookup(t, "acme", key)
		return err == nil && rec.State == state
	}, settleWithin, 5*time.Millisecond, "the record becomes %s", state)
}

// An EFFECTFUL body failed and the store was down when the key was to be
// marked indeterminate: once the store answers, the mark is made in the
// background, so the record does not stay pending (with a run's last call,
// no duplicate ever comes to find the holder lost) and a person can find
// and decide it.
func TestUnmarkedIndeterminateMarkedOnceTheStoreIsBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.faults.setDown("MarkIndeterminate", true)
	h.acts.on("Book", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	env := h.activityEnv(t, "acme")

	_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	o := requireIndeterminate(t, err, activity.ReasonBodyFailed, true)
	rec, err := h.lookup(t, "acme", o.Key)
	require.NoError(t, err)
	require.Equal(t, store.StatePending, rec.State, "the store is still down")

	h.faults.setDown("MarkIndeterminate", false)
	requireState(t, h, o.Key, store.StateIndeterminate)
	rec, err = h.lookup(t, "acme", o.Key)
	require.NoError(t, err)
	assert.Contains(t, rec.Reason, "gateway timeout", "the mark says why")
	assert.Equal(t, 1, h.rec.count(interceptor.EventIndeterminate), "the call was reported indeterminate once")
}

// An IDEMPOTENT body failed and the store was down when the key was to be
// freed: once the store answers the key is freed in the background, so the
// retry need not wait out the lease.
func TestUnreleasedClaimReleasedOnceTheStoreIsBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.faults.setDown("Release", true)
	h.acts.on("Reserve", func(context.Context, int, BookRequest) error {
		return temporal.NewApplicationError("inventory busy", "Busy")
	})
	env := h.activityEnv(t, "acme")
	released := h.rec.next(interceptor.EventReleased)

	_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
	requireApplicationError(t, err, "Busy")
	key := h.rec.first(t, interceptor.EventStoreError).Key
	h.faults.setDown("Release", false)
	require.Eventually(t, func() bool {
		_, err := h.lookup(t, "acme", key)
		return errors.Is(err, store.ErrNotFound)
	}, settleWithin, 5*time.Millisecond, "the key is freed")
	receive(t, released, "the released event")
}

// A store that answers too slowly for StoreTimeout while the outcome is
// recorded is a store that is down: the outcome is recorded in the
// background too, not left pending.
func TestOrphanedOutcomeRecordedAfterStoreTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) {
		o.RecordAttempts = 5
		o.RecordBackoff = 10 * time.Millisecond
		o.StoreTimeout = 15 * time.Millisecond // ends during the second pause
	})
	h.faults.failNext("Complete", 3)
	env := h.activityEnv(t, "acme")

	got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err)
	requireState(t, h, got.Key, store.StateCompleted)
}

// The background retries are bounded: a claim orphaned while the bound is
// reached stays pending, and its orphaned event says it is not retried;
// after Stop none is retried.
func TestOrphanRetriesBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	interceptor.SetOrphanRetryLimit(h.ic, 1)
	h.faults.setDown("Complete", true)
	env := h.activityEnv(t, "acme")

	first, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err)
	second, err := book(env, h.acts.Book, BookRequest{Flight: "AF447"})
	require.NoError(t, err)
	var notRetried int
	for _, e := range h.rec.all() {
		if e.Kind == interceptor.EventOrphaned && strings.Contains(e.Err.Error(), "not retried") {
			notRetried++
			assert.Equal(t, second.Key, e.Key)
		}
	}
	assert.Equal(t, 1, notRetried)

	h.faults.setDown("Complete", false)
	requireState(t, h, first.Key, store.StateCompleted)
	rec, err := h.lookup(t, "acme", second.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StatePending, rec.State, "the claim over the bound is left pending")

	h.ic.Stop()
	h.ic.Stop() // a second Stop is harmless
	h.faults.setDown("Complete", true)
	third, err := book(env, h.acts.Book, BookRequest{Flight: "LH400"})
	require.NoError(t, err)
	last := h.rec.all()
	for i := len(last) - 1; i >= 0; i-- {
		if last[i].Kind == interceptor.EventOrphaned {
			assert.Equal(t, third.Key, last[i].Key)
			assert.Contains(t, last[i].Err.Error(), "not retried", "after Stop nothing is retried")
			break
		}
	}
}
