package interceptor_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
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
		h.Fields[interceptor.KeySecretHeader] = p
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
