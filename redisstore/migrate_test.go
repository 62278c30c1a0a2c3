package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// keyType is the Redis type of key.
func keyType(t *testing.T, client redis.UniversalClient, key string) string {
	t.Helper()
	typ, err := client.Type(context.Background(), key).Result()
	require.NoError(t, err)
	return typ
}

// Records the previous release wrote (record hashes, written by its own
// scripts) are read and settled by this one: a completed key answers a
// duplicate from its outcome, a pending one is held by its holder (whose
// token still completes it), an indeterminate one stays indeterminate until
// resolved, a Wait on an old pending record wakes when it completes, and
// each write converts the record it writes.
func TestLegacyRecordsAreRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s, client := newStoreClient(t, redisstore.Options{Clock: clock})
	done := redisstore.LegacyClaim(t, s, "t", "done", "old", time.Minute)
	redisstore.LegacyComplete(t, s, "t", "done", done, "outcome\x00bytes")
	held := redisstore.LegacyClaim(t, s, "t", "held", "old", time.Minute)
	lost := redisstore.LegacyClaim(t, s, "t", "lost", "old", time.Minute)
	redisstore.LegacyMark(t, s, "t", "lost", lost, "crashed")
	require.Equal(t, "hash", keyType(t, client, redisstore.RecordKey(s, "t", "done")))

	claim := func(key string) store.Result {
		t.Helper()
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: "new", Lease: time.Minute})
		require.NoError(t, err)
		return res
	}
	res := claim("done")
	assert.Equal(t, store.StatusCompleted, res.Status)
	assert.Equal(t, []byte("outcome\x00bytes"), res.Record.Outcome)
	assert.Equal(t, done, res.Record.Token)
	res = claim("held")
	assert.Equal(t, store.StatusHeld, res.Status)
	assert.Equal(t, "old", res.Record.Holder)
	assert.False(t, res.LeaseExpired)
	res = claim("lost")
	assert.Equal(t, store.StatusIndeterminate, res.Status)
	assert.Equal(t, "crashed", res.Record.Reason)
	for _, key := range []string{"done", "held", "lost"} {
		assert.Equal(t, "hash", keyType(t, client, redisstore.RecordKey(s, "t", key)), "a read converts nothing")
		_, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: key})
		require.NoError(t, err)
	}
	page, err := s.List(ctx, store.ListParams{Tenant: "t", Order: store.OldestFirst})
	require.NoError(t, err)
	assert.Equal(t, []string{"done", "held", "lost"}, keys(page.Records))
	backlog, err := s.CountBacklog(ctx)
	require.NoError(t, err)
	total := 0
	for _, b := range backlog {
		total += b.Indeterminate
	}
	assert.Equal(t, 1, total, "the backlog counts the old indeterminate record")

	// A Wait on the old pending record registers on it (a write: it
	// converts it) and wakes when its holder's token completes it.
	waited := make(chan store.Result, 1)
	go func() {
		res, err := s.Wait(ctx, store.WaitParams{Tenant: "t", Key: "held", Token: held})
		assert.NoError(t, err)
		waited <- res
	}()
	require.Eventually(t, func() bool {
		return keyType(t, client, redisstore.RecordKey(s, "t", "held")) == "string"
	}, 5*time.Second, time.Millisecond, "the Wait registered on the record")
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "held", Token: held, Outcome: []byte("late")}))
	res = <-waited
	assert.Equal(t, store.StatusCompleted, res.Status)
	assert.Equal(t, []byte("late"), res.Record.Outcome)

	require.NoError(t, s.Resolve(ctx, store.ResolveParams{Tenant: "t", Key: "lost", Decision: store.ActionComplete,
		Outcome: []byte("decided"), Token: lost, By: "ops", Reason: "checked"}))
	assert.Equal(t, "string", keyType(t, client, redisstore.RecordKey(s, "t", "lost")), "the resolution converted it")
	rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "lost"})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
	assert.Equal(t, "crashed", rec.Reason, "the conversion keeps every field")
	assert.Equal(t, "old", rec.Holder)

	// An old pending record whose lease ran out is taken over by the script.
	stale := redisstore.LegacyClaim(t, s, "t", "stale", "old", time.Second)
	clock.Advance(2 * time.Second)
	res, err = s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "stale", Holder: "new", Lease: time.Minute, Supersede: stale})
	require.NoError(t, err)
	assert.Equal(t, store.StatusAcquired, res.Status)

	n, err := s.Forget(ctx, store.ForgetParams{Tenant: "t"})
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	exists, err := client.Exists(ctx, redisstore.IndexKey(s, "t"), redisstore.AgeKey(s, "t")).Result()
	require.NoError(t, err)
	assert.Zero(t, exists, "Forget empties the old index set too")
}

// Migrate converts every record of the previous layout, keeping its time
// to live and its fields, folds the old index sets into the age indexes,
// and a second run finds nothing to do.
func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, client := newStoreClient(t, redisstore.Options{})
	want := map[string]store.Record{}
	for _, tenant := range []string{"a", "{b}"} {
		for i, state := range []store.State{store.StatePending, store.StateCompleted, store.StateIndeterminate} {
			key := fmt.Sprintf("k%d", i)
			token := redisstore.LegacyClaim(t, s, tenant, key, "old", time.Minute)
			switch state {
			case store.StateCompleted:
				redisstore.LegacyComplete(t, s, tenant, key, token, "out")
			case store.StateIndeterminate:
				redisstore.LegacyMark(t, s, tenant, key, token, "why")
			}
			rec, err := s.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: key})
			require.NoError(t, err)
			want[tenant+"/"+key] = rec
		}
	}
	// One tenant from before the age index.
	require.NoError(t, client.Del(ctx, redisstore.AgeKey(s, "{b}")).Err())
	claimOK(t, s, "a", "new")

	n, err := s.Migrate(ctx, redisstore.MigrateParams{})
	require.NoError(t, err)
	assert.Equal(t, 6, n.Migrated)
	assert.Empty(t, n.Cursor)
	for id, w := range want {
		rk := redisstore.RecordKey(s, w.Tenant, w.Key)
		assert.Equal(t, "string", keyType(t, client, rk), id)
		ttl, err := client.PTTL(ctx, rk).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "%s keeps its time to live", id)
		got, err := s.Lookup(ctx, store.LookupParams{Tenant: w.Tenant, Key: w.Key})
		require.NoError(t, err)
		assert.Equal(t, w, got, id)
	}
	for _, tenant := range []string{"a", "{b}"} {
		exists, err := client.Exists(ctx, redisstore.IndexKey(s, tenant)).Result()
		require.NoError(t, err)
		assert.Zero(t, exists, "the old index set of %q is gone", tenant)
		page, err := s.List(ctx, store.ListParams{Tenant: tenant})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, len(page.Records), 3, "tenant %q lists its records", tenant)
		ttl, err := client.PTTL(ctx, redisstore.AgeKey(s, tenant)).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "the age index of %q expires", tenant)
	}
	again, err := s.Migrate(ctx, redisstore.MigrateParams{})
	require.NoError(t, err)
	assert.Zero(t, again.Migrated, "a second run converts nothing")
}

// Migrate with a limit returns a cursor; calls resumed from it convert
// every record once, and stopping half way leaves a store that works.
func TestMigrateResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, client := newStoreClient(t, redisstore.Options{})
	const n = 600
	for i := range n {
		redisstore.LegacyClaim(t, s, fmt.Sprintf("t%d", i%7), fmt.Sprintf("k%03d", i), "old", time.Minute)
	}
	total, calls := 0, 0
	cursor := ""
	for {
		res, err := s.Migrate(ctx, redisstore.MigrateParams{Cursor: cursor, Limit: 50})
		require.NoError(t, err)
		total += res.Migrated
		calls++
		if res.Cursor == "" {
			break
		}
		assert.GreaterOrEqual(t, res.Migrated, 50, "a call that stops has reached its limit")
		cursor = res.Cursor
		if calls == 2 {
			// Half way: the store reads both layouts.
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t0", Key: "k000", Holder: "new", Lease: time.Minute})
			require.NoError(t, err)
			assert.Equal(t, store.StatusHeld, res.Status)
		}
	}
	assert.Equal(t, n, total)
	assert.Greater(t, calls, 2, "the limit cut the migration into calls")
	for i := range n {
		assert.Equal(t, "string", keyType(t, client, redisstore.RecordKey(s, fmt.Sprintf("t%d", i%7), fmt.Sprintf("k%03d", i))))
	}
	res, err := s.Migrate(ctx, redisstore.MigrateParams{})
	require.NoError(t, err)
	assert.Zero(t, res.Migrated)
	_, err = s.Migrate(ctx, redisstore.MigrateParams{Cursor: "nonsense"})
	assert.Error(t, err)
}
