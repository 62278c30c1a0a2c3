package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// TestReplicasRace runs storetest's replicas race on two stores, each with
// its own client, on one Redis.
func TestReplicasRace(t *testing.T) {
	t.Parallel()
	storetest.Replicas(t, func(t *testing.T) (store.Store, store.Store) {
		_, prefix := redisenv.Redis(t) // Cleans the prefix when the test ends.
		var replicas [2]store.Store
		for i := range replicas {
			client := redis.NewClient(&redis.Options{Addr: redisenv.RedisAddr(), PoolSize: 16})
			s, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
			require.NoError(t, err)
			t.Cleanup(func() {
				assert.NoError(t, s.Close())
				assert.NoError(t, client.Close())
			})
			replicas[i] = s
		}
		return replicas[0], replicas[1]
	})
}
