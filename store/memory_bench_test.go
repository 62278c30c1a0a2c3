package store_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/idempotency/store"
)

// BenchmarkMemory measures the dispatcher's hot path on the memory store:
// one Claim and one Complete per operation, each on a fresh key, from
// parallel goroutines. Baseline is a plain mutex-guarded map doing the same
// bookkeeping, run in the same process so the figure to read is the ratio.
func BenchmarkMemory(b *testing.B) {
	ctx := context.Background()
	var seq atomic.Int64
	key := func() string { return "key-" + strconv.FormatInt(seq.Add(1), 10) }
	outcome := []byte(`{"seat":"12A"}`)

	b.Run("Baseline", func(b *testing.B) {
		var mu sync.Mutex
		records := make(map[string]*store.Record)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				k := key()
				mu.Lock()
				if _, ok := records[k]; !ok {
					records[k] = &store.Record{Key: k, State: store.StatePending, Token: store.NewToken()}
				}
				mu.Unlock()
				mu.Lock()
				rec := records[k]
				rec.State = store.StateCompleted
				rec.Outcome = append([]byte(nil), outcome...)
				mu.Unlock()
			}
		})
	})

	b.Run("ClaimComplete", func(b *testing.B) {
		s, err := store.NewMemory(store.MemoryOptions{TTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				k := key()
				res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: k, Holder: "bench", Lease: time.Minute})
				if err != nil || res.Status != store.StatusAcquired {
					b.Fatalf("Claim: %v %v", res.Status, err)
				}
				if err := s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: k, Token: res.Record.Token, Outcome: outcome}); err != nil {
					b.Fatal(err)
				}
			}
		})
	})

	b.Run("DuplicateClaim", func(b *testing.B) {
		s, err := store.NewMemory(store.MemoryOptions{TTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "dup", Holder: "bench", Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: "dup", Token: res.Record.Token, Outcome: outcome}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "dup", Holder: "bench", Lease: time.Minute})
				if err != nil || res.Status != store.StatusCompleted {
					b.Fatalf("Claim: %v %v", res.Status, err)
				}
			}
		})
	})
}
