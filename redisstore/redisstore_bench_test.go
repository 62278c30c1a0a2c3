package redisstore_test

import (
	"context"
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

// runCallers runs op b.N times in total over callers goroutines, each call
// with its own sequence number.
func runCallers(b *testing.B, callers int, op func(i int64) error) {
	b.Helper()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		once sync.Once
		fail error
	)
	b.ResetTimer()
	for range callers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
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
	b.StopTimer()
	if fail != nil {
		b.Fatal(fail)
	}
}

// BenchmarkClaimComplete measures the library's hot path, a Claim that
// acquires a fresh key followed by its Complete, against the floor: the
// cheapest two commands go-redis can send for the same job by hand (SET NX
// to take the key, SET XX to record the outcome), in the same process and
// over the same kind of client. Each library case reports its ns/op as a
// ratio to the floor's ("x-floor").
func BenchmarkClaimComplete(b *testing.B) {
	_, prefix := testenv.Redis(b) // Cleans the prefix when the benchmark ends.
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(), PoolSize: 64})
	b.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	outcome := []byte(`{"seat":"12A","price":"120.00"}`)
	var run atomic.Int64 // Keeps keys fresh across b.N rounds.

	for _, callers := range []int{1, 8, 32} {
		var floorNs float64
		b.Run("callers="+strconv.Itoa(callers)+"/floor", func(b *testing.B) {
			b.ReportAllocs()
			r := strconv.FormatInt(run.Add(1), 10)
			runCallers(b, callers, func(i int64) error {
				key := prefix + ":floor:" + r + ":" + strconv.FormatInt(i, 10)
				ok, err := client.SetNX(ctx, key, "pending", time.Minute).Result()
				if err != nil || !ok {
					return err
				}
				return client.SetXX(ctx, key, outcome, time.Hour).Err()
			})
			floorNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run("callers="+strconv.Itoa(callers)+"/library", func(b *testing.B) {
			b.ReportAllocs()
			r := strconv.FormatInt(run.Add(1), 10)
			runCallers(b, callers, func(i int64) error {
				key := "lib:" + r + ":" + strconv.FormatInt(i, 10)
				res, err := s.Claim(ctx, store.ClaimParams{Tenant: "bench", Key: key, Holder: "bench", Lease: time.Minute})
				if err != nil {
					return err
				}
				return s.Complete(ctx, store.CompleteParams{Tenant: "bench", Key: key, Token: res.Record.Token, Outcome: outcome})
			})
			if floorNs > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/floorNs, "x-floor")
			}
		})
	}
}
