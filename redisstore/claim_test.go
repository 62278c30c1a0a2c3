package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/store"
)

// BenchmarkNewClaim measures the Go side of a claim before it reaches
// Redis: the clock, the token, the expiries, the keys and the packed
// record. The store never contacts Redis here (its clock is given, its
// client a single node, so the publisher is known without asking).
func BenchmarkNewClaim(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b.Cleanup(func() { _ = client.Close() })
	s, err := New(client, Options{Clock: store.SystemClock{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	p := store.ClaimParams{Tenant: "bench", Key: "lib:1:12345", Holder: "bench", Lease: time.Minute,
		Origin: store.Origin{WorkflowID: "booking-42", ActivityType: "Book"}}
	b.ReportAllocs()
	for b.Loop() {
		var c claim
		if err := s.newClaim(ctx, p, &c); err != nil {
			b.Fatal(err)
		}
	}
}
