package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/tesserix/idempotency/keyspace"
)

// bookingRequest is a realistic activity argument, the one keyspace's own
// benchmarks use.
type bookingRequest struct {
	Flight    string    `json:"flight"`
	Passenger string    `json:"passenger"`
	Seat      string    `json:"seat"`
	FareCents int64     `json:"fare_cents"`
	Currency  string    `json:"currency"`
	Departure time.Time `json:"departure"`
}

var (
	deriveRequest = bookingRequest{
		Flight: "BA117", Passenger: "Ada Lovelace", Seat: "12A",
		FareCents: 129_50, Currency: "GBP",
		Departure: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC),
	}
	deriveMap = map[string]any{
		"flight": "BA117", "passenger": "Ada Lovelace", "seat": "12A",
		"fare_cents": json.Number("12950"), "currency": "GBP",
		"departure": "2026-03-01T09:30:00Z",
	}
	deriveKeys = []string{"flight", "passenger", "seat", "fare_cents", "currency", "departure"}
)

// naiveKey is what Derive is measured against: json.Marshal of the
// arguments, SHA-256, hex (keyspace's benchmarks use the same).
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

// nsPerOp runs fn n times and returns the nanoseconds per call. What fn
// returns is kept alive, so the compiler cannot drop the work.
func nsPerOp(n int, fn func() int) float64 {
	sink := 0
	t := time.Now()
	for range n {
		sink += fn()
	}
	ns := float64(time.Since(t).Nanoseconds()) / float64(n)
	runtime.KeepAlive(sink)
	return ns
}

// benchDerive is section 5.
func benchDerive(_ context.Context, _ *benchEnv, cfg config, out, progress io.Writer) error {
	inputs := []struct {
		name string
		args any
	}{{"struct", deriveRequest}, {"map", deriveMap}}
	fmt.Fprintf(out, "## 5. Derive against json.Marshal + SHA-256\n\n%d calls per repetition, one goroutine. Ratio = Derive ÷ naive within one repetition: median (min–max) of %d.\n\n", cfg.DeriveN, cfg.Reps)
	fmt.Fprintln(out, "| argument | Derive ns/op | naive ns/op | Derive ÷ naive |")
	fmt.Fprintln(out, "|---|---|---|---|")
	for _, in := range inputs {
		ki := keyspace.Input{Tenant: "acme", Run: "run_1", Activity: "book", Arguments: in.args, KeyArguments: deriveKeys}
		if _, err := keyspace.Derive(ki); err != nil {
			return err
		}
		var d, n []float64
		for range cfg.Reps {
			d = append(d, nsPerOp(cfg.DeriveN, func() int { k, _ := keyspace.Derive(ki); return len(k) }))
			n = append(n, nsPerOp(cfg.DeriveN, func() int { return len(naiveKey("acme", "run_1", "book", in.args)) }))
		}
		fmt.Fprintf(progress, "   %s: Derive %v ns, naive %v ns\n", in.name, d, n)
		fmt.Fprintf(out, "| %s | %s | %s | %s |\n", in.name, spread(d, "%.0f"), spread(n, "%.0f"), spread(ratios(d, n), "%.2f"))
	}
	fmt.Fprintln(out)
	return nil
}
