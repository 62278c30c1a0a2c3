package storetest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/idempotency/store"
)

// Floor is a store's baseline for [Benchmark]: the cheapest way its backend
// does the job of one claim and, for the claim that wins, one completion,
// written by hand with the same client. It takes key if it is free and then
// records outcome under it, reporting won; or it learns that key is taken
// and reports !won. Keys are fresh; each is asked twice.
type Floor func(ctx context.Context, key string, outcome []byte) (won bool, err error)

// Benchmark measures a store's hot path against its floor, in the same
// process over the same client, as one metric: lib/floor, the store's
// throughput as a fraction of the floor's (1 is as fast as the hand-written
// commands; the goal is at least 0.8 for a networked store). Every store
// runs it (see river's driver benchmarks), so the figures compare.
//
// Every key is claimed by two callers, as when a retry races the first
// attempt: one takes it and records the outcome, the other learns of the
// standing record. An op is one of the two claims. The floor and the store
// run interleaved in four alternating rounds within each sub-benchmark
// (1, 8 and 32 concurrent callers), so a noisy machine slows both alike.
// It fails if any key was won twice or never.
func Benchmark(b *testing.B, s store.Store, floor Floor) {
	b.Helper()
	ctx := context.Background()
	outcome := []byte(`{"seat":"12A","price":"120.00"}`)
	var run atomic.Int64 // Keeps keys fresh across rounds and b.N probes.

	// Each returns an op over a fresh set of keys and counts the keys won.
	floorOp := func(won *atomic.Int64) func(i int64) error {
		r := strconv.FormatInt(run.Add(1), 10)
		return func(i int64) error {
			w, err := floor(ctx, "floor:"+r+":"+strconv.FormatInt(i/2, 10), outcome)
			if w {
				won.Add(1)
			}
			return err
		}
	}
	libraryOp := func(won *atomic.Int64) func(i int64) error {
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
	impls := []func(*atomic.Int64) func(int64) error{floorOp, libraryOp}

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
			b.ReportMetric(float64(elapsed[0])/float64(elapsed[1]), "lib/floor")
		})
	}
}

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
