package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// After Forget, nothing of the tenant is left in Redis: no record in either
// layout (packed strings, the previous release's hashes), in any state, no
// age index, no old index set — and not a record that lost its index
// entry either. A scan of every key under the tenant's hash tag proves it.
// Another tenant's keys are untouched.
func TestForgetLeavesNothingOfTheTenant(t *testing.T) {
	t.Parallel()
	s, client := newStoreClient(t, redisstore.Options{})
	ctx := context.Background()
	for _, tenant := range []string{"acme", "globex"} {
		recordEachState(t, s, tenant)
		redisstore.LegacyClaim(t, s, tenant, "old-pending", "old", time.Minute)
		tok := redisstore.LegacyClaim(t, s, tenant, "old-completed", "old", time.Minute)
		redisstore.LegacyComplete(t, s, tenant, "old-completed", tok, "o")
		tok = redisstore.LegacyClaim(t, s, tenant, "old-indeterminate", "old", time.Minute)
		redisstore.LegacyMark(t, s, tenant, "old-indeterminate", tok, "r")
		// A record whose index entries were lost.
		claimOK(t, s, tenant, "unindexed")
		require.NoError(t, client.ZRem(ctx, redisstore.AgeKey(s, tenant), "unindexed").Err())
		require.NoError(t, client.SRem(ctx, redisstore.IndexKey(s, tenant), "unindexed").Err())
		score, err := client.ZScore(ctx, redisstore.AgeKey(s, tenant), "unindexed").Result()
		require.Error(t, err, "still indexed (score %v): the test would prove nothing", score)
	}
	scan := func(tenant string) []string { return tenantKeys(t, client, s, tenant) }
	require.NotEmpty(t, scan("acme"))
	_, err := s.Forget(ctx, store.ForgetParams{Tenant: "acme"})
	require.NoError(t, err)
	assert.Empty(t, scan("acme"), "keys of the forgotten tenant left in Redis")
	assert.NotEmpty(t, scan("globex"), "another tenant's keys")
	_, err = s.Lookup(ctx, store.LookupParams{Tenant: "globex", Key: "unindexed"})
	assert.NoError(t, err)
}

// escapeGlob escapes the characters SCAN's MATCH reads as a pattern.
func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// tenantKeys returns every key of s's tenant in Redis, found with SCAN.
func tenantKeys(t *testing.T, client redis.UniversalClient, s *redisstore.Store, tenant string) []string {
	t.Helper()
	base := strings.TrimSuffix(redisstore.AgeKey(s, tenant), ":age")
	var keys []string
	iter := client.Scan(t.Context(), 0, escapeGlob(base)+":*", 1000).Iterator()
	for iter.Next(t.Context()) {
		keys = append(keys, iter.Val())
	}
	require.NoError(t, iter.Err())
	return keys
}
