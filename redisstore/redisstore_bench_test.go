package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

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

// BenchmarkStore is storetest's store benchmark: Claim and Complete
// against the floor, the cheapest commands go-redis can send by hand for the
// same job over the same client — SET NX GET (take the key, or read the one
// standing, in one round trip) and, for the winner, SET XX — reported as
// lib/floor. The store has waited once before, so it is subscribed to its
// change channel, as a worker's store is once any duplicate has waited.
func BenchmarkStore(b *testing.B) { benchmarkStore(b, redisstore.Options{}) }

// BenchmarkStoreIndexOnlyWhatWaits is BenchmarkStore with
// Options.IndexOnlyWhatWaits: the claim of a free key is one SET NX GET PX.
func BenchmarkStoreIndexOnlyWhatWaits(b *testing.B) {
	benchmarkStore(b, redisstore.Options{IndexOnlyWhatWaits: true})
}

func benchmarkStore(b *testing.B, opts redisstore.Options) {
	_, prefix := redisenv.Redis(b) // Registered first, so its cleanup runs last.
	client := redis.NewClient(&redis.Options{Addr: redisenv.RedisAddr(), PoolSize: 64})
	b.Cleanup(func() {
		if err := deleteKeys(client, prefix); err != nil {
			b.Error(err)
		}
		_ = client.Close()
	})
	opts.Prefix = prefix
	s, err := redisstore.New(client, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if _, err := s.Wait(ctx, store.WaitParams{Tenant: "bench", Key: "none", Token: 1}); err != nil {
		b.Fatal(err)
	}
	storetest.Benchmark(b, s, func(ctx context.Context, key string, outcome []byte) (bool, error) {
		key = prefix + ":" + key
		err := client.SetArgs(ctx, key, "pending", redis.SetArgs{Mode: "NX", Get: true, TTL: time.Minute}).Err()
		if !errors.Is(err, redis.Nil) {
			return false, err // The standing value came back: not won.
		}
		return true, client.SetXX(ctx, key, outcome, time.Hour).Err()
	})
}

// BenchmarkWakeUp measures how long a waiting duplicate takes to learn that
// the holder completed: from the moment Complete is called to the moment the
// Wait returns, through the script, the notification and the Wait's re-read.
// Each op claims a fresh key, starts a Wait, lets it settle into waiting
// (2ms), and completes the key. It reports p50, p99 and max in
// microseconds; a lost notification shows as a poll (10ms or more). Run it
// with a fixed count, e.g. -benchtime=500x.
func BenchmarkWakeUp(b *testing.B) {
	_, prefix := redisenv.Redis(b)
	client := redis.NewClient(&redis.Options{Addr: redisenv.RedisAddr()})
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
