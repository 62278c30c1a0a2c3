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
	require.NoError(t, s.Resolve(ctx, store.ResolveParams{Tenant: "t", Key: "freed", Decision: store.ActionFree}))
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

// TestMigrateListsOldRecords lists records written before the store kept
// an age index once Migrate has run, and only then.
func TestMigrateListsOldRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, client := newStoreClient(t, redisstore.Options{})
	for _, tenant := range []string{"a", "b"} {
		for _, key := range []string{"k1", "k2"} {
			token := redisstore.LegacyClaim(t, s, tenant, key, "old", time.Minute)
			redisstore.LegacyMark(t, s, tenant, key, token, "lost")
		}
		// What an earlier version left: records and index, no age index.
		require.NoError(t, client.Del(ctx, redisstore.AgeKey(s, tenant)).Err())
	}
	claimOK(t, s, "a", "new")
	page, err := s.List(ctx, store.ListParams{Tenant: "a"})
	require.NoError(t, err)
	assert.Equal(t, []string{"new"}, keys(page.Records), "the gap before the backfill")

	res, err := s.Migrate(ctx, redisstore.MigrateParams{})
	n := res.Migrated
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

	res, err = s.Migrate(ctx, redisstore.MigrateParams{})
	n = res.Migrated
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

// TestListBudget: a listing that keeps few of the tenant's records walks a
// bounded number of index entries per call, returning short (even empty)
// pages with a cursor, and still lists every record once, in order.
func TestListBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s := newStore(t, redisstore.Options{Clock: clock})
	redisstore.SetListBudget(s, 5)
	var want []string
	for i := range 40 {
		key := string(rune('a'+i/26)) + string(rune('a'+i%26))
		rec := claimOK(t, s, "t", key)
		if i%13 == 0 {
			require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "t", Key: key, Token: rec.Token}))
			want = append(want, key)
		} else {
			require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: key, Token: rec.Token}))
		}
		if i%3 == 0 {
			clock.Advance(time.Millisecond)
		}
	}
	for _, order := range []store.Order{store.OldestFirst, store.NewestFirst} {
		p := store.ListParams{Tenant: "t", States: []store.State{store.StateIndeterminate}, Order: order, Limit: 2}
		var got []string
		calls, short := 0, 0
		for {
			page, err := s.List(ctx, p)
			require.NoError(t, err)
			calls++
			if len(page.Records) < p.Limit && page.Next != "" {
				short++
			}
			got = append(got, keys(page.Records)...)
			if page.Next == "" {
				break
			}
			p.Cursor = page.Next
			require.Less(t, calls, 100, "the listing never ended")
		}
		exp := append([]string(nil), want...)
		if order == store.NewestFirst {
			for i, j := 0, len(exp)-1; i < j; i, j = i+1, j-1 {
				exp[i], exp[j] = exp[j], exp[i]
			}
		}
		assert.Equal(t, exp, got, order.String())
		assert.Positive(t, short, "%s: some pages stopped at the budget", order)
	}
}
