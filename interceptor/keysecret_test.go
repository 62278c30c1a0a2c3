package interceptor_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/keyspace"
)

// secretOf returns the secret of generation gen, its bytes all fill.
func secretOf(t testing.TB, gen int, fill byte) *keyspace.Secret {
	t.Helper()
	s, err := keyspace.NewSecret(gen, bytes.Repeat([]byte{fill}, keyspace.MinSecretLength))
	require.NoError(t, err)
	return s
}

// keyedHeader is the header of a call of a workflow of tenant keyed under
// generation gen (0: unkeyed), as the workflow side writes it.
func keyedHeader(t testing.TB, tenant string, gen int) *commonpb.Header {
	t.Helper()
	h := tenantHeader(t, tenant)
	if gen > 0 {
		p, err := converter.GetDefaultDataConverter().ToPayload(gen)
		require.NoError(t, err)
		h.Fields[wire.KeySecretHeader] = p
	}
	return h
}

// Under ScopeWorkflow a later run finds the record of an earlier run keyed
// under another derivation by looking it up. A lookup the store does not
// answer is not "no record there": the call ends not run (retryable) and
// the body is not entered, though the call's own derivation holds nothing.
// Once the store answers, the earlier record answers the call: one effect.
func TestKeyOfAnEarlierRunLookupErrorRunsNothing(t *testing.T) {
	for _, failed := range []int{1, 2} { // the call's own key, then the other derivation
		h := newHarness(t, func(o *interceptor.Options) {
			o.Scope = interceptor.ScopeWorkflow
			o.KeySecret = secretOf(t, 1, 0x11)
			o.ClaimRetry = -1 // a store error ends the call at once
		})
		req := BookRequest{Flight: "LH400", RequestID: "r1"}

		// An earlier run of the workflow, made before keyed derivation
		// was switched on: unkeyed.
		env := h.activityEnv(t, "acme")
		env.SetHeader(keyedHeader(t, "acme", 0))
		first, err := book(env, h.acts.Book, req)
		require.NoError(t, err)
		require.Equal(t, 1, h.acts.ledger.count("Book"))

		// A later run, keyed under generation 1, while the store cannot
		// answer a lookup.
		env = h.activityEnv(t, "acme")
		env.SetHeader(keyedHeader(t, "acme", 1))
		h.faults.failAfter("Lookup", failed-1, 1)
		_, err = book(env, h.acts.Book, req)
		_, notRun := activity.AsNotRun(err)
		assert.True(t, notRun, "lookup %d failed: want the not-run error, got %v", failed, err)
		assert.Equal(t, 1, h.acts.ledger.count("Book"), "lookup %d failed: the body ran again", failed)

		// The store answers again: the earlier record answers.
		again, err := book(env, h.acts.Book, req)
		require.NoError(t, err)
		assert.Equal(t, first, again)
		assert.Equal(t, 1, h.acts.ledger.count("Book"))
	}
}

// Two workers hold generation 1 with different bytes (one secret file
// gained a trailing newline). The first to derive under generation 1 in
// a tenant binds it to its bytes in the store; the other refuses every
// call keyed under generation 1 there — retryably, as misconfigured —
// instead of deriving another key for the same call and running it again.
// A call it refused runs on a worker with the right bytes, and answers
// from the record.
func TestKeySecretBytesDisagreeUnderOneGeneration(t *testing.T) {
	a := newHarness(t, func(o *interceptor.Options) { o.KeySecret = secretOf(t, 1, 0x11) })
	b := newHarness(t, func(o *interceptor.Options) {
		o.Store = a.faults
		o.KeySecret = secretOf(t, 1, 0x12)
		o.Identity = "worker-b"
	})
	b.acts = a.acts // one airline: one ledger
	req := BookRequest{Flight: "LH400", RequestID: "r1"}

	envA := a.activityEnv(t, "acme")
	envA.SetHeader(keyedHeader(t, "acme", 1))
	first, err := book(envA, a.acts.Book, req)
	require.NoError(t, err)

	envB := b.activityEnv(t, "acme")
	envB.SetHeader(keyedHeader(t, "acme", 1))
	_, err = book(envB, b.acts.Book, req)
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, decision.ErrorTypeUnknownKeySecret, appErr.Type())
	assert.False(t, appErr.NonRetryable(), "a worker redeployed with the right bytes runs the retry")
	assert.Contains(t, err.Error(), "trailing newline")
	assert.Equal(t, 1, a.acts.ledger.count("Book"), "the worker with the other bytes ran the call again")
	assert.Equal(t, 1, b.rec.count(interceptor.EventMisconfigured))

	// The retry on the worker with the bytes the store names answers from
	// the record.
	again, err := book(envA, a.acts.Book, req)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, 1, a.acts.ledger.count("Book"))

	// In a tenant where b derived first, its bytes are the generation's
	// and a is refused: whichever wins, one derivation per tenant.
	envB = b.activityEnv(t, "globex")
	envB.SetHeader(keyedHeader(t, "globex", 1))
	_, err = book(envB, b.acts.Book, req)
	require.NoError(t, err)
	envA = a.activityEnv(t, "globex")
	envA.SetHeader(keyedHeader(t, "globex", 1))
	_, err = book(envA, a.acts.Book, req)
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, decision.ErrorTypeUnknownKeySecret, appErr.Type())
	assert.Equal(t, 2, a.acts.ledger.count("Book"), "one effect per tenant")
}

// The fingerprint record costs one claim per tenant and generation in a
// worker's life, and a store that cannot answer it ends the call not run.
func TestKeySecretBindingStoreDown(t *testing.T) {
	h := newHarness(t, func(o *interceptor.Options) {
		o.KeySecret = secretOf(t, 1, 0x11)
		o.ClaimRetry = -1
	})
	req := BookRequest{Flight: "LH400", RequestID: "r1"}
	env := h.activityEnv(t, "acme")
	env.SetHeader(keyedHeader(t, "acme", 1))
	h.faults.failNext("Claim", 1) // the fingerprint record's claim
	_, err := book(env, h.acts.Book, req)
	_, notRun := activity.AsNotRun(err)
	require.True(t, notRun, "want the not-run error, got %v", err)
	assert.Equal(t, 0, h.acts.ledger.count("Book"))

	_, err = book(env, h.acts.Book, req)
	require.NoError(t, err)
	assert.Equal(t, 1, h.acts.ledger.count("Book"))
	rec, err := h.lookup(t, "acme", "kf1:1")
	require.NoError(t, err, "the fingerprint record")
	assert.Equal(t, "idempotency.key-secret", rec.Origin.ActivityType)
}
