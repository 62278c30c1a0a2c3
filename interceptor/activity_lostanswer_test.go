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

// A write that settles a claim can land while its answer is lost: the store
// completed (marked, released) the claim under this execution's token, and
// the dispatcher heard an error. Its retry then finds the claim no longer
// pending (ErrNotHolder). That is not a claim taken over or orphaned: the
// dispatcher reads the record and, finding its own write there, reports the
// write as landed, not a false alarm an operator would chase.

func TestCompleteWhoseAnswerWasLostIsCompleted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.faults.loseNext("Complete", 1)
	env := h.activityEnv(t, "acme")

	got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err)
	rec, err := h.lookup(t, "acme", got.Key)
	require.NoError(t, err)
	require.Equal(t, store.StateCompleted, rec.State)
	assert.Equal(t, 1, h.rec.count(interceptor.EventCompleted), "the outcome is reported recorded: %v", h.rec.kinds())
	assert.Zero(t, h.rec.count(interceptor.EventOrphaned), "the claim is not orphaned: its outcome is recorded")
}

func TestCompleteWhoseBackgroundAnswerWasLostIsCompleted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.OrphanRetry = 20 * time.Second })
	h.faults.failNext("Complete", 2) // RecordAttempts is 2: the store is down for both
	h.faults.loseNext("Complete", 1) // the first attempt in the background lands, its answer lost
	completed := h.rec.next(interceptor.EventCompleted)
	env := h.activityEnv(t, "acme")

	got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err)
	receive(t, completed, "the outcome reported recorded in the background")
	rec, err := h.lookup(t, "acme", got.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
	for _, e := range h.rec.all() {
		if e.Kind == interceptor.EventStoreError {
			assert.NotContains(t, e.Err.Error(), "not the holder", "no background attempt reports the landed write as an error")
		}
	}
}

// A Complete refused because the claim was taken over is still orphaned:
// the record is someone else's. Only the execution's own completion, with
// its own outcome, reads as landed.
func TestCompleteAfterATakeoverIsStillOrphaned(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acts.on("Book", func(ctx context.Context, _ int, req BookRequest) error {
		key, _ := activity.Key(ctx)
		rec, err := h.mem.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: string(key)})
		if err != nil {
			return err
		}
		// A duplicate took the claim over and completed it with its own
		// answer; then this execution's first Complete fails as if its
		// answer was lost, and its retry is refused.
		res, err := h.mem.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: string(key), Holder: "other", Lease: time.Minute, Supersede: rec.Token})
		if err != nil {
			return err
		}
		if err := h.mem.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: string(key), Token: res.Record.Token, Outcome: []byte("other")}); err != nil {
			return err
		}
		h.faults.failNext("Complete", 1)
		return nil
	})
	env := h.activityEnv(t, "acme")
	_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err, "the effect happened: its result is returned")
	assert.Zero(t, h.rec.count(interceptor.EventCompleted), "another caller's record is not this execution's outcome: %v", h.rec.kinds())
	assert.Equal(t, 1, h.rec.count(interceptor.EventOrphaned))
}

func TestMarkWhoseAnswerWasLostIsMarked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.OrphanRetry = 20 * time.Second })
	h.faults.loseNext("MarkIndeterminate", 1)
	h.acts.on("Book", func(context.Context, int, BookRequest) error { return errors.New("gateway timeout") })
	env := h.activityEnv(t, "acme")

	_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	o := requireIndeterminate(t, err, activity.ReasonBodyFailed, true)
	rec, err := h.lookup(t, "acme", o.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State)
	assert.Zero(t, h.rec.count(interceptor.EventOrphaned), "the mark landed: nothing is left to settle in the background (%v)", h.rec.kinds())
}

func TestReleaseWhoseAnswerWasLostIsReleased(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.OrphanRetry = 20 * time.Second })
	h.faults.loseNext("Release", 1)
	h.acts.on("Reserve", func(context.Context, int, BookRequest) error {
		return temporal.NewApplicationError("inventory busy", "Busy")
	})
	env := h.activityEnv(t, "acme")

	_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
	requireApplicationError(t, err, "Busy")
	key := h.rec.first(t, interceptor.EventStoreError).Key
	_, err = h.lookup(t, "acme", key)
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, 1, h.rec.count(interceptor.EventReleased), "the release is reported: %v", h.rec.kinds())
	assert.Zero(t, h.rec.count(interceptor.EventOrphaned), "the key is free: nothing is left to settle in the background")
	for _, e := range h.rec.all() {
		if e.Kind == interceptor.EventStoreError {
			assert.True(t, strings.Contains(e.Err.Error(), "answer lost"), "the one store error is the lost answer: %v", e.Err)
		}
	}
}
