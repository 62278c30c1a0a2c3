// Package redisenv gives tests a Redis client under a key prefix of its own
// (see package testenv for the environment). Only tests that talk to Redis
// import it, so a test binary of redisstore never links pgx.
package redisenv

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/internal/testenv"
)

// RedisAddrEnv names the variable holding the test Redis's address.
const RedisAddrEnv = "IDEMPOTENCY_TEST_REDIS_ADDR"

// DefaultRedisAddr is the test Redis's address when RedisAddrEnv is unset.
const DefaultRedisAddr = "127.0.0.1:6379"

// RedisAddr returns the test Redis's address: RedisAddrEnv, or
// DefaultRedisAddr when it is unset.
func RedisAddr() string { return testenv.Getenv(RedisAddrEnv, DefaultRedisAddr) }

// Redis returns a client of the test Redis and a key prefix no other test
// uses. It calls [testenv.Unreachable] when Redis does not answer a PING. When the
// test ends it deletes every key starting with the prefix (found with SCAN,
// never KEYS) and closes the client; cleanups the test registers after
// calling Redis run before that.
func Redis(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	addr := RedisAddr()
	client := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		testenv.Unreachable(t, "Redis at "+addr, err)
	}
	// The trailing '_' keeps one test's prefix from being the start of
	// another's (t_1_2_7 of t_1_2_70), so the SCAN below stays in its lane.
	prefix := testenv.UniqueName("t") + "_"
	t.Cleanup(func() {
		defer func() { _ = client.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := DeleteRedisPrefix(ctx, client, prefix); err != nil {
			t.Errorf("testenv: deleting Redis keys under %q: %v", prefix, err)
		}
	})
	return client, prefix
}

// DeleteRedisPrefix deletes every key of client starting with prefix, in
// SCAN batches. The prefix must hold no glob characters, as the names
// [UniqueName] makes do not.
func DeleteRedisPrefix(ctx context.Context, client redis.UniversalClient, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			// One key at a time: keys of different tenants may live in
			// different Cluster slots.
			if err := client.Unlink(ctx, k).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
