package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// TestReplicasRace plays two worker replicas, each with its own client and
// Store on one Redis, racing claims on the same keys: exactly one claim per
// key wins, and every loser ends up with the winner's outcome, directly or
// by waiting for it.
func TestReplicasRace(t *testing.T) {
	t.Parallel()
	const (
		keys             = 1000
		claims           = 10_000
		callersPerClient = 16
	)
	_, prefix := testenv.Redis(t) // Cleans the prefix when the test ends.
	var replicas [2]*redisstore.Store
	for i := range replicas {
		client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(), PoolSize: callersPerClient})
		s, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() {
			assert.NoError(t, s.Close())
			assert.NoError(t, client.Close())
		})
		replicas[i] = s
	}

	var (
		next     atomic.Int64
		wins     [keys]atomic.Int32
		winners  [keys]atomic.Pointer[string]
		mu       sync.Mutex
		observed = make(map[int][]string) // key → outcomes losers saw
		waited   atomic.Int64
	)
	ctx := t.Context()
	var g group
	for r, s := range replicas {
		for c := range callersPerClient {
			holder := fmt.Sprintf("replica-%d-caller-%d", r, c)
			g.Go(func() error {
				for {
					i := next.Add(1) - 1
					if i >= claims {
						return nil
					}
					k := int(i / (claims / keys)) // Consecutive claims share a key: they race.
					key := fmt.Sprintf("key-%04d", k)
					res, err := s.Claim(ctx, store.ClaimParams{Tenant: "race", Key: key, Holder: holder, Lease: time.Minute})
					if err != nil {
						return err
					}
					switch res.Status {
					case store.StatusAcquired:
						wins[k].Add(1)
						outcome := holder + "/" + strconv.FormatInt(res.Record.Token, 10)
						winners[k].Store(&outcome)
						err := s.Complete(ctx, store.CompleteParams{Tenant: "race", Key: key, Token: res.Record.Token, Outcome: []byte(outcome)})
						if err != nil {
							return err
						}
						continue
					case store.StatusHeld:
						waited.Add(1)
						waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
						res, err = s.Wait(waitCtx, store.WaitParams{Tenant: "race", Key: key, Token: res.Record.Token})
						cancel()
						if err != nil {
							return fmt.Errorf("wait on %s: %w", key, err)
						}
					}
					if res.Status != store.StatusCompleted {
						return fmt.Errorf("%s: a loser saw %v, want completed", key, res.Status)
					}
					mu.Lock()
					observed[k] = append(observed[k], string(res.Record.Outcome))
					mu.Unlock()
				}
			})
		}
	}
	require.NoError(t, g.Wait())

	for k := range keys {
		require.EqualValues(t, 1, wins[k].Load(), "key %d: exactly one claim wins", k)
		winner := *winners[k].Load()
		for _, o := range observed[k] {
			require.Equal(t, winner, o, "key %d: losers see the winner's outcome", k)
		}
		require.Len(t, observed[k], claims/keys-1, "key %d: every other claim lost", k)
	}
	t.Logf("%d of %d losing claims found the key held and waited", waited.Load(), claims-keys)
}
