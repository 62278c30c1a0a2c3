package interceptor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// indeterminateRecord claims key for another holder and marks it
// indeterminate, returning its token.
func indeterminateRecord(t *testing.T, st store.Store, key string) int64 {
	t.Helper()
	ctx := context.Background()
	res, err := st.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: key, Holder: "elsewhere", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	require.NoError(t, st.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "acme", Key: key, Token: res.Record.Token, Reason: "r"}))
	return res.Record.Token
}

// A decision applies to the indeterminate record it was made on: a late
// Resolve of an old decision leaves a newer indeterminate record, that
// nobody has decided on, alone.
func TestResolveFencedByToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	resolve := interceptor.ResolveActivityIn(h.mem, nil)
	old := indeterminateRecord(t, h.mem, "k")
	require.NoError(t, resolve(ctx, decision.ResolveRequest{Tenant: "acme", Key: "k", Action: decision.ActionFree, Token: old}))
	newer := indeterminateRecord(t, h.mem, "k")

	require.NoError(t, resolve(ctx, decision.ResolveRequest{Tenant: "acme", Key: "k", Action: decision.ActionFree, Token: old}),
		"a stale decision is no error: the call runs again and finds the newer record")
	rec, err := h.mem.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, store.StateIndeterminate, rec.State, "the newer record still waits for a person")
	assert.Equal(t, newer, rec.Token)
}

// Who decided, and why, is kept with the record.
func TestResolveKeepsTheTrail(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	token := indeterminateRecord(t, h.mem, "k")
	result, err := json.Marshal("CONF-BA117-Ada")
	require.NoError(t, err)
	require.NoError(t, interceptor.ResolveActivityIn(h.mem, nil)(ctx, decision.ResolveRequest{
		Tenant: "acme", Key: "k", Action: decision.ActionComplete, Result: result, Token: token,
		By: "ops@acme", Reason: "airline confirmed", Reference: "PNR 5XK2",
	}))
	rec, err := h.mem.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
	assert.Equal(t, store.ActionComplete, rec.Resolution.Action)
	assert.Equal(t, "ops@acme", rec.Resolution.By)
	assert.Equal(t, "airline confirmed", rec.Resolution.Reason)
	assert.Equal(t, "PNR 5XK2", rec.Resolution.Reference)
	assert.False(t, rec.Resolution.At.IsZero())
}
