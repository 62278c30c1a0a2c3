package interceptor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/interceptor"
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
	requireApplicationError(t, err, interceptor.ErrorTypeStoreUnavailable)
	assert.Zero(t, h.acts.ledger.total(), "a store that is down is not permission")
	assert.Greater(t, h.rec.count(interceptor.EventStoreError), 1, "the claim was retried")
}
