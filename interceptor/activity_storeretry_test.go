package interceptor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// A claim that fails because the store is briefly down has entered no body:
// the dispatcher retries the store within the activity's time instead of
// ending the call (for EFFECTFUL: in front of a person) at the first error.
func TestStoreBrieflyDownAtClaim(t *testing.T) {
	t.Parallel()
	for _, k := range dedupKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *interceptor.Options) { o.ClaimRetry = 20 * time.Second })
			h.faults.failNext("Claim", 3)
			env := h.activityEnv(t, "acme")
			got, err := book(env, k.fn(h), BookRequest{Flight: "BA117"})
			require.NoError(t, err, "the store came back within the retry window")
			assert.Equal(t, 1, got.Call)
			assert.Equal(t, 1, h.acts.ledger.count(k.act), "the body ran once")
			assert.Equal(t, 3, h.rec.count(interceptor.EventStoreError), "each failed call is reported")
			assert.Zero(t, h.rec.count(interceptor.EventIndeterminate))
		})
	}
}

// A store that stays down past the retry window still ends the call, and
// never reads as permission.
func TestStoreDownPastClaimRetry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.ClaimRetry = 300 * time.Millisecond })
	h.faults.setDown("Claim", true)
	env := h.activityEnv(t, "acme")
	_, err := book(env, h.acts.Reserve, BookRequest{Flight: "BA117"})
	requireApplicationError(t, err, decision.ErrorTypeStoreUnavailable)
	assert.Zero(t, h.acts.ledger.total(), "a store that is down is not permission")
	assert.Greater(t, h.rec.count(interceptor.EventStoreError), 1, "the claim was retried")
}

// The retry window is measured from when the store stopped answering, not
// from when the execution started: a call that waited a long time for
// another holder still rides out a brief outage that comes after the wait.
func TestStoreBrieflyDownAfterALongWait(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *interceptor.Options) { o.ClaimRetry = 300 * time.Millisecond })
	req := BookRequest{Flight: "BA117"}
	env := h.activityEnv(t, "acme")
	run, _ := h.runIDs(t, env)
	key := h.key(t, "Book", "acme", run, req)
	held, err := h.mem.Claim(context.Background(), store.ClaimParams{Tenant: "acme", Key: key, Holder: "worker-elsewhere", Lease: time.Hour})
	require.NoError(t, err)

	waiting := h.rec.next(interceptor.EventWaiting)
	done := make(chan error, 1)
	go func() {
		_, err := book(env, h.acts.Book, req)
		done <- err
	}()
	receive(t, waiting, "the call to wait for the other holder")
	time.Sleep(600 * time.Millisecond) // the wait outlasts ClaimRetry
	h.faults.failNext("Claim", 2)      // the store blips as the holder lets go
	require.NoError(t, h.mem.Release(context.Background(), store.ReleaseParams{Tenant: "acme", Key: key, Token: held.Record.Token}))

	require.NoError(t, receive(t, done, "the call to end"), "a brief outage after a long wait is ridden out")
	assert.Equal(t, 1, h.acts.ledger.count("Book"))
	assert.Zero(t, h.rec.count(interceptor.EventIndeterminate))
}
