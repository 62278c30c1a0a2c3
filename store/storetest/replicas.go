package storetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// Replicas races two replicas of a store — two Stores, each with its own
// client or pool, on one backend, as two workers have — over 10,000 claims
// on 1,000 keys, 16 callers each, consecutive claims on one key so that they
// collide. Exactly one claim per key may win; every other one must end with
// the winner's outcome, read from the standing record or by waiting for it.
// newReplicas returns the two replicas; they must share records and nothing
// else. A store that lives in one process (the memory store) passes itself
// twice. Skipped with -short.
func Replicas(t *testing.T, newReplicas func(t *testing.T) (a, b store.Store)) {
	t.Helper()
	if testing.Short() {
		t.Skip("races 10,000 claims; skipped with -short")
	}
	const (
		keys              = 1000
		claims            = 10_000
		callersPerReplica = 16
	)
	a, b := newReplicas(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var (
		next     atomic.Int64
		wins     [keys]atomic.Int32
		winners  [keys]atomic.Pointer[string]
		mu       sync.Mutex
		observed = make(map[int][]string) // key → the outcomes its losers saw
		waited   atomic.Int64
		wg       sync.WaitGroup
		once     sync.Once
		first    error
	)
	fail := func(err error) { once.Do(func() { first = err; cancel() }) }
	for r, s := range []store.Store{a, b} {
		for c := range callersPerReplica {
			holder := fmt.Sprintf("replica-%d-caller-%d", r, c)
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= claims {
						return
					}
					k := int(i / (claims / keys)) // Consecutive claims share a key: they race.
					key := fmt.Sprintf("key-%04d", k)
					res, err := s.Claim(ctx, store.ClaimParams{Tenant: "race", Key: key, Holder: holder, Lease: time.Minute})
					if err != nil {
						fail(fmt.Errorf("claim %s: %w", key, err))
						return
					}
					switch res.Status {
					case store.StatusAcquired:
						wins[k].Add(1)
						outcome := holder + "/" + strconv.FormatInt(res.Record.Token, 10)
						winners[k].Store(&outcome)
						if err := s.Complete(ctx, store.CompleteParams{Tenant: "race", Key: key, Token: res.Record.Token, Outcome: []byte(outcome)}); err != nil {
							fail(fmt.Errorf("complete %s: %w", key, err))
							return
						}
						continue
					case store.StatusHeld:
						waited.Add(1)
						waitCtx, cancelWait := context.WithTimeout(ctx, 10*time.Second)
						res, err = s.Wait(waitCtx, store.WaitParams{Tenant: "race", Key: key, Token: res.Record.Token})
						cancelWait()
						if err != nil {
							fail(fmt.Errorf("wait on %s: %w", key, err))
							return
						}
					}
					if res.Status != store.StatusCompleted {
						fail(fmt.Errorf("%s: a loser saw %v, want completed", key, res.Status))
						return
					}
					mu.Lock()
					observed[k] = append(observed[k], string(res.Record.Outcome))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	require.NoError(t, first)
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
