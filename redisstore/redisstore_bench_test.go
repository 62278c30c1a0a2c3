package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// runCallers runs op n times in total over callers goroutines, each call
// with its own sequence number from 0 to n-1.
func runCallers(callers int, n int64, op func(i int64) error) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		once sync.Once
		fail error
	)
	for range callers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					once.Do(func() { fail = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return fail
}

// deleteKeys unlinks every key under prefix in large batches, so that the
// hundreds of thousands of keys a benchmark leaves are gone before
// testenv's one-key-at-a-time cleanup runs (and finds none).
func deleteKeys(client *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, prefix+"*", 5000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := client.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// BenchmarkClaimComplete measures the library's hot path against the floor,
// the cheapest commands go-redis can send by hand for the same job, in the
// same process over the same client.
//
// Every key is claimed by two callers, as when a retry races the first
// attempt: one takes the key and records the outcome, the other learns of
// the standing record. By hand that is SET NX GET (take the key, or read the
// one standing, in one round trip) and, for the winner, SET XX; the library
// does Claim and, for the winner, Complete. An op is one of the two claims.
// The store has waited once before, so it is subscribed to its change
// channel, as a worker's store is once any duplicate has waited.
//
// The floor and the library run interleaved in four alternating rounds
// within one sub-benchmark, so that a noisy machine slows both alike. Each
// sub-benchmark reports floor-ns/op and lib-ns/op, and lib/floor, the
// library's throughput as a fraction of the floor's (the goal is at least
// 0.8). It fails if any key was won twice.
func BenchmarkClaimComplete(b *testing.B) {
	_, prefix := testenv.Redis(b) // Registered first, so its cleanup runs last.
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(), PoolSize: 64})
	b.Cleanup(func() {
		if err := deleteKeys(client, prefix); err != nil {
			b.Error(err)
		}
		_ = client.Close()
	})
	s, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	// The steady state of a worker that has waited once: its store is
	// subscribed to the change channel, so every change published reaches it.
	if _, err := s.Wait(ctx, store.WaitParams{Tenant: "bench", Key: "none", Token: 1}); err != nil {
		b.Fatal(err)
	}
	outcome := []byte(`{"seat":"12A","price":"120.00"}`)
	var run atomic.Int64 // Keeps keys fresh across rounds and b.N probes.

	// Each returns an op over a fresh set of keys and counts the keys won.
	floor := func(won *atomic.Int64) func(i int64) error {
		r := strconv.FormatInt(run.Add(1), 10)
		return func(i int64) error {
			key := prefix + ":floor:" + r + ":" + strconv.FormatInt(i/2, 10)
			err := client.SetArgs(ctx, key, "pending", redis.SetArgs{Mode: "NX", Get: true, TTL: time.Minute}).Err()
			if !errors.Is(err, redis.Nil) {
				return err // The standing value came back: not won.
			}
			won.Add(1)
			return client.SetXX(ctx, key, outcome, time.Hour).Err()
		}
	}
	library := func(won *atomic.Int64) func(i int64) error {
		r := strconv.FormatInt(run.Add(1), 10)
		return func(i int64) error {
			key := "lib:" + r + ":" + strconv.FormatInt(i/2, 10)
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: "bench", Key: key, Holder: "bench", Lease: time.Minute})
			if err != nil || res.Status != store.StatusAcquired {
				return err
			}
			won.Add(1)
			return s.Complete(ctx, store.CompleteParams{Tenant: "bench", Key: key, Token: res.Record.Token, Outcome: outcome})
		}
	}
	impls := []func(*atomic.Int64) func(int64) error{floor, library}

	for _, callers := range []int{1, 8, 32} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			const rounds = 4
			per := max(int64(b.N)/rounds/2*2, 2) // Even: two claims per key.
			var elapsed [2]time.Duration
			b.ResetTimer()
			for r := range rounds {
				order := []int{0, 1}
				if r%2 == 1 {
					slices.Reverse(order)
				}
				for _, which := range order {
					var won atomic.Int64
					op := impls[which](&won)
					start := time.Now()
					if err := runCallers(callers, per, op); err != nil {
						b.Fatal(err)
					}
					elapsed[which] += time.Since(start)
					if keys := per / 2; won.Load() != keys {
						b.Fatalf("%d keys, %d won: a key was won twice or never", keys, won.Load())
					}
				}
			}
			b.StopTimer()
			n := float64(per * rounds)
			floorNs, libNs := float64(elapsed[0].Nanoseconds())/n, float64(elapsed[1].Nanoseconds())/n
			b.ReportMetric(floorNs, "floor-ns/op")
			b.ReportMetric(libNs, "lib-ns/op")
			b.ReportMetric(floorNs/libNs, "lib/floor")
		})
	}
}

// BenchmarkWakeUp measures how long a waiting duplicate takes to learn that
// the holder completed: from the moment Complete is called to the moment the
// Wait returns, through the script, the notification and the Wait's re-read.
// Each op claims a fresh key, starts a Wait, lets it settle into waiting
// (2ms), and completes the key. It reports p50, p99 and max in
// microseconds; a lost notification shows as a poll (10ms or more). Run it
// with a fixed count, e.g. -benchtime=500x.
func BenchmarkWakeUp(b *testing.B) {
	_, prefix := testenv.Redis(b)
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	b.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		key := "wake:" + strconv.Itoa(i)
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "bench", Key: key, Holder: "bench", Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		woke := make(chan time.Time, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := s.Wait(wctx, store.WaitParams{Tenant: "bench", Key: key, Token: res.Record.Token})
			if err != nil {
				b.Error(err)
			}
			woke <- time.Now()
		}()
		time.Sleep(2 * time.Millisecond)
		start := time.Now()
		if err := s.Complete(ctx, store.CompleteParams{Tenant: "bench", Key: key, Token: res.Record.Token, Outcome: []byte("ok")}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-woke).Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(lat[len(lat)/2]), "p50-µs")
	b.ReportMetric(us(lat[min(len(lat)-1, len(lat)*99/100)]), "p99-µs")
	b.ReportMetric(us(lat[len(lat)-1]), "max-µs")
}
