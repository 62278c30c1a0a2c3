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

// TestAgeIndexFollowsRecords checks the age index List reads against the
// records: every write that ends a record takes its key out, and the index
// lives physically at least as long as the records in it.
func TestAgeIndexFollowsRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s, client := newStoreClient(t, redisstore.Options{Clock: clock, TTL: time.Hour})
	age := redisstore.AgeKey(s, "t")
	members := func() []string {
		m, err := client.ZRange(ctx, age, 0, -1).Result()
		require.NoError(t, err)
		return m
	}

	released := claimOK(t, s, "t", "released")
	freed := claimOK(t, s, "t", "freed")
	kept := claimOK(t, s, "t", "kept")
	assert.ElementsMatch(t, []string{"released", "freed", "kept"}, members())
	score, err := client.ZScore(ctx, age, "kept").Result()
	require.NoError(t, err)
	assert.Equal(t, float64(kept.CreatedAt.UnixMicro()), score, "scored by the claim's time")

	require.NoError(t, s.Release(ctx, store.ReleaseParams{Tenant: "t", Key: "released", Token: released.Token}))
	require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "t", Key: "freed", Token: freed.Token}))
	require.NoError(t, s.Resolve(ctx, store.ResolveParams{Tenant: "t", Key: "freed", Decision: store.DecisionFree}))
	assert.Equal(t, []string{"kept"}, members())

	// A completion restarts the retention window: the index's physical
	// expiry follows the record's.
	clock.Advance(30 * time.Minute)
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "kept", Token: kept.Token}))
	recTTL, err := client.PTTL(ctx, redisstore.RecordKey(s, "t", "kept")).Result()
	require.NoError(t, err)
	ageTTL, err := client.PTTL(ctx, age).Result()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ageTTL, recTTL)

	// Sweep and Forget take the keys out with their records.
	clock.Advance(2 * time.Hour)
	claimOK(t, s, "t", "fresh")
	n, err := s.Sweep(ctx, store.SweepParams{})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"fresh"}, members())
	_, err = s.Forget(ctx, store.ForgetParams{Tenant: "t"})
	require.NoError(t, err)
	assert.Empty(t, members())
	exists, err := client.Exists(ctx, age).Result()
	require.NoError(t, err)
	assert.Zero(t, exists)
}

// TestBackfillListIndex lists records written before the store kept an age
// index once BackfillListIndex has run, and only then.
func TestBackfillListIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, client := newStoreClient(t, redisstore.Options{})
	for _, tenant := range []string{"a", "b"} {
		for _, key := range []string{"k1", "k2"} {
			rec := claimOK(t, s, tenant, key)
			require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: key, Token: rec.Token}))
		}
		// What an earlier version left: records and index, no age index.
		require.NoError(t, client.Del(ctx, redisstore.AgeKey(s, tenant)).Err())
	}
	claimOK(t, s, "a", "new")
	page, err := s.List(ctx, store.ListParams{Tenant: "a"})
	require.NoError(t, err)
	assert.Equal(t, []string{"new"}, keys(page.Records), "the gap before the backfill")

	n, err := s.BackfillListIndex(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	page, err = s.List(ctx, store.ListParams{Tenant: "a", Order: store.OldestFirst})
	require.NoError(t, err)
	assert.Equal(t, []string{"k1", "k2", "new"}, keys(page.Records))
	page, err = s.ListAcrossTenants(ctx, store.ListParams{States: []store.State{store.StateIndeterminate}})
	require.NoError(t, err)
	assert.Len(t, page.Records, 4)
	ttl, err := client.PTTL(ctx, redisstore.AgeKey(s, "b")).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl, "the backfilled index expires")

	n, err = s.BackfillListIndex(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a second run adds nothing")
}

func keys(recs []store.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Key)
	}
	return out
}
