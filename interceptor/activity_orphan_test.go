package interceptor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// The body succeeded but the store was down when it came to record the
// result: once the store answers again, the dispatcher records it in the
// background, so the key does not stay pending with nobody to settle it
// and a later duplicate gets the answer instead of a lost holder.
func TestOrphanedOutcomeRecordedOnceTheStoreIsBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.OrphanRetry = 20 * time.Second })
	h.faults.failNext("Complete", 5) // RecordAttempts is 2: three more fail in the background
	orphaned := h.rec.next(interceptor.EventOrphaned)
	completed := h.rec.next(interceptor.EventCompleted)
	env := h.activityEnv(t, "acme")

	got, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err, "the effect happened: its result is returned")
	receive(t, orphaned, "the orphaned event")
	receive(t, completed, "the outcome recorded in the background")

	rec, err := h.lookup(t, "acme", got.Key)
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
	assert.Equal(t, 1, h.rec.count(interceptor.EventOrphaned))

	h.clock.Advance(time.Hour - time.Minute) // past any lease, within the retention window
	again, err := book(env, h.acts.Book, BookRequest{Flight: "BA117"})
	require.NoError(t, err)
	assert.Equal(t, got, again, "the duplicate gets the recorded answer")
	assert.Equal(t, 1, h.acts.ledger.count("Book"), "one effect")
}
