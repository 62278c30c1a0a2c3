package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// A record with a retention window of its own gets it as Redis's
// physical TTL too, on every write (the claim, a renewal, the completion,
// a decision), and the tenant's indexes live at least as long: a window
// longer than the store's TTL is not cut short by Redis dropping the key,
// and one shorter does not linger a TTL.
func TestOwnRetentionPhysicalTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s, client := newStoreClient(t, redisstore.Options{Clock: clock, TTL: time.Hour})
	pttl := func(key string) time.Duration {
		t.Helper()
		d, err := client.PTTL(ctx, key).Result()
		require.NoError(t, err)
		return d
	}
	claim := func(key string, retention time.Duration) store.Record {
		t.Helper()
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: "h", Lease: time.Minute, Retention: retention})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status)
		return res.Record
	}
	long := claim("long", 72*time.Hour)
	short := claim("short", 10*time.Minute)
	plain := claim("plain", 0)
	rec := redisstore.RecordKey
	assert.Greater(t, pttl(rec(s, "t", "long")), 71*time.Hour, "the claim: its own window")
	assert.Less(t, pttl(rec(s, "t", "short")), 15*time.Minute)
	assert.Less(t, pttl(rec(s, "t", "plain")), 2*time.Hour)
	assert.GreaterOrEqual(t, pttl(redisstore.AgeKey(s, "t")), pttl(rec(s, "t", "long")), "the age index outlives the record")

	clock.Advance(30 * time.Second)
	_, err := s.Renew(ctx, store.RenewParams{Tenant: "t", Key: "long", Token: long.Token, Lease: time.Minute})
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "long", Token: long.Token}))
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "short", Token: short.Token}))
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "plain", Token: plain.Token}))
	assert.Greater(t, pttl(rec(s, "t", "long")), 71*time.Hour, "the completion: its own window")
	assert.Less(t, pttl(rec(s, "t", "short")), 15*time.Minute)
	got, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "long"})
	require.NoError(t, err)
	assert.Equal(t, clock.Now().Add(72*time.Hour).UnixMicro(), got.ExpiresAt.UnixMicro(), "exact to the microsecond")
	assert.GreaterOrEqual(t, pttl(redisstore.AgeKey(s, "t")), pttl(rec(s, "t", "long")))
}
