package keyspace_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/tesserix/idempotency/keyspace"
)

// bookingRequest is a realistic activity argument.
type bookingRequest struct {
	Flight    string    `json:"flight"`
	Passenger string    `json:"passenger"`
	Seat      string    `json:"seat"`
	FareCents int64     `json:"fare_cents"`
	Currency  string    `json:"currency"`
	Departure time.Time `json:"departure"`
}

var (
	benchRequest = bookingRequest{
		Flight: "BA117", Passenger: "Ada Lovelace", Seat: "12A",
		FareCents: 129_50, Currency: "GBP",
		Departure: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC),
	}
	benchMap = map[string]any{
		"flight": "BA117", "passenger": "Ada Lovelace", "seat": "12A",
		"fare_cents": json.Number("12950"), "currency": "GBP",
		"departure": "2026-03-01T09:30:00Z",
	}
	benchKeys = []string{"flight", "passenger", "seat", "fare_cents", "currency", "departure"}
	sinkKey   keyspace.Key
	sinkStr   string
)

// naiveKey is the design keyspace is measured against: json.Marshal of the
// arguments, SHA-256, hex. It is neither canonical nor selective.
func naiveKey(tenant, run, activity string, args any) string {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	h := sha256.New()
	h.Write([]byte(tenant + "\x00" + run + "\x00" + activity + "\x00"))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// Run with: go test ./keyspace -run '^$' -bench . -benchmem
// Compare Derive with Naive in the same run: the ratio is the result.
func BenchmarkStruct(b *testing.B) {
	in := keyspace.Input{Tenant: "acme", Run: "run_1", Activity: "book", Arguments: benchRequest, KeyArguments: benchKeys}
	b.Run("Derive", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkKey, _ = keyspace.Derive(in)
		}
	})
	b.Run("Naive", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkStr = naiveKey("acme", "run_1", "book", benchRequest)
		}
	})
}

// BenchmarkKeyed compares keyed derivation (Input.Secret) with the
// unkeyed one in the same run: the ratio is the cost of the secret.
func BenchmarkKeyed(b *testing.B) {
	secret, err := keyspace.NewSecret(1, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	in := keyspace.Input{Tenant: "acme", Run: "run_1", Activity: "book", Arguments: benchRequest, KeyArguments: benchKeys}
	b.Run("Unkeyed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkKey, _ = keyspace.Derive(in)
		}
	})
	keyed := in
	keyed.Secret = secret
	b.Run("Keyed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkKey, _ = keyspace.Derive(keyed)
		}
	})
}

func BenchmarkMap(b *testing.B) {
	in := keyspace.Input{Tenant: "acme", Run: "run_1", Activity: "book", Arguments: benchMap, KeyArguments: benchKeys}
	b.Run("Derive", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkKey, _ = keyspace.Derive(in)
		}
	})
	b.Run("Naive", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkStr = naiveKey("acme", "run_1", "book", benchMap)
		}
	})
}

func BenchmarkStructParallel(b *testing.B) {
	in := keyspace.Input{Tenant: "acme", Run: "run_1", Activity: "book", Arguments: &benchRequest, KeyArguments: benchKeys}
	b.Run("Derive", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = keyspace.Derive(in)
			}
		})
	})
	b.Run("Naive", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = naiveKey("acme", "run_1", "book", &benchRequest)
			}
		})
	})
}
