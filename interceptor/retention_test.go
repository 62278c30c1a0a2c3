package interceptor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/store"
)

// A declaration's own retention is kept with its records, and the store
// honours it: past it the key is free and the activity runs anew, while
// records of the store's window live on.
func TestRetentionPerActivity(t *testing.T) {
	t.Parallel()
	h := newCheckHarness(t)
	short := activity.MustDeclare(h.fares.HoldShort, activity.Policy{Kind: activity.KindIdempotent,
		KeyArguments: []string{"flight"}, Retention: 10 * time.Minute})
	require.NoError(t, h.ic.Declare(short))
	env := h.env(t)
	env.RegisterActivity(h.fares.HoldShort)

	val, err := env.ExecuteActivity("HoldShort", FareRequest{Flight: "BA117"})
	require.NoError(t, err)
	var first Booking
	require.NoError(t, val.Get(&first))
	_, err = h.call(env, "HoldFare", FareRequest{Flight: "BA117"})
	require.NoError(t, err)

	runID, _ := h.runIDs(t, env)
	key, err := short.Key("acme", runID, []any{FareRequest{Flight: "BA117"}})
	require.NoError(t, err)
	rec, err := h.lookup(t, "acme", string(key))
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, rec.Retention, "kept with the record")
	assert.Equal(t, t0.Add(10*time.Minute), rec.ExpiresAt)

	h.clock.Advance(10*time.Minute + time.Second)
	_, err = h.lookup(t, "acme", string(key))
	require.ErrorIs(t, err, store.ErrNotFound, "past its own window the key is free")
	val, err = env.ExecuteActivity("HoldShort", FareRequest{Flight: "BA117"})
	require.NoError(t, err)
	var again Booking
	require.NoError(t, val.Get(&again))
	assert.Equal(t, first.Call+1, again.Call, "run anew")

	other, err := h.decls["HoldFare"].Key("acme", runID, []any{FareRequest{Flight: "BA117"}})
	require.NoError(t, err)
	rec, err = h.lookup(t, "acme", string(other))
	require.NoError(t, err, "the store's window (a day) still keeps the other activity's record")
	assert.Zero(t, rec.Retention)
}

func TestRetentionShorterThanLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t) // Lease 300ms
	d := activity.MustDeclare(h.acts.Book, activity.Policy{Kind: activity.KindEffectful,
		KeyArguments: []string{"flight"}, Name: "BookShort", Retention: 100 * time.Millisecond})
	err := h.ic.Declare(d)
	require.ErrorIs(t, err, activity.ErrInvalidDeclaration)
	var de *activity.DeclarationError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "Policy.Retention", de.Field)
	assert.Contains(t, err.Error(), "Options.Lease")
	_, ok := h.ic.Declaration("BookShort")
	assert.False(t, ok, "nothing declared")
}
