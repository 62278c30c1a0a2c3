package store_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tesserix/idempotency/store"
)

// Claim a key, run the effect, record its outcome: the memory store's
// protocol end to end.
func ExampleMemory() {
	ctx := context.Background()
	s, err := store.NewMemory(store.MemoryOptions{TTL: 24 * time.Hour})
	if err != nil {
		panic(err)
	}

	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "book/BA117", Holder: "worker-1", Lease: time.Minute})
	if err != nil {
		panic(err)
	}
	fmt.Println("first claim:", res.Status, res.Record.State)

	// ... the effect runs here, then its result is recorded under the token.
	err = s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: "book/BA117", Token: res.Record.Token, Outcome: []byte("seat 12A")})
	if err != nil {
		panic(err)
	}

	rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: "book/BA117"})
	if err != nil {
		panic(err)
	}
	fmt.Printf("recorded: %s %q\n", rec.State, rec.Outcome)
	// Output:
	// first claim: acquired pending
	// recorded: completed "seat 12A"
}

// A duplicate claim on a completed key gets the recorded outcome instead of
// running the effect again.
func ExampleMemory_Claim_duplicate() {
	ctx := context.Background()
	s, _ := store.NewMemory(store.MemoryOptions{})
	claim := store.ClaimParams{Tenant: "acme", Key: "book/BA117", Holder: "worker-1", Lease: time.Minute}

	first, _ := s.Claim(ctx, claim)
	_ = s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: "book/BA117", Token: first.Record.Token, Outcome: []byte("seat 12A")})

	claim.Holder = "worker-2" // A retry, perhaps on another worker.
	dup, _ := s.Claim(ctx, claim)
	fmt.Printf("duplicate: %s %q\n", dup.Status, dup.Record.Outcome)

	// The same key in another tenant is another record.
	claim.Tenant = "globex"
	other, _ := s.Claim(ctx, claim)
	fmt.Println("other tenant:", other.Status)
	// Output:
	// duplicate: completed "seat 12A"
	// other tenant: acquired
}

// A concurrent duplicate waits for the holder instead of running alongside
// it, and gets the holder's outcome.
func ExampleMemory_Wait() {
	ctx := context.Background()
	s, _ := store.NewMemory(store.MemoryOptions{})
	claim := store.ClaimParams{Tenant: "acme", Key: "book/BA117", Holder: "worker-1", Lease: time.Minute}

	holder, _ := s.Claim(ctx, claim)
	claim.Holder = "worker-2"
	dup, _ := s.Claim(ctx, claim)
	fmt.Println("duplicate:", dup.Status)

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: "book/BA117", Token: holder.Record.Token, Outcome: []byte("seat 12A")})
	}()
	waited, _ := s.Wait(ctx, store.WaitParams{Tenant: "acme", Key: "book/BA117", Token: dup.Record.Token})
	<-done
	fmt.Printf("after waiting: %s %q\n", waited.Status, waited.Record.Outcome)
	// Output:
	// duplicate: held
	// after waiting: completed "seat 12A"
}

// A holder whose lease ran out is presumed dead only when a caller decides
// so and takes the claim over under the token it saw; the old holder is then
// fenced off.
func ExampleMemory_Claim_supersede() {
	ctx := context.Background()
	s, _ := store.NewMemory(store.MemoryOptions{})
	claim := store.ClaimParams{Tenant: "acme", Key: "book/BA117", Holder: "worker-1", Lease: time.Minute}

	stale, _ := s.Claim(ctx, claim)
	claim.Holder = "worker-2"
	claim.Supersede = stale.Record.Token
	taken, _ := s.Claim(ctx, claim)
	fmt.Println("takeover:", taken.Status, taken.Record.Holder)

	err := s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: "book/BA117", Token: stale.Record.Token})
	fmt.Println("old holder refused:", errors.Is(err, store.ErrNotHolder))
	// Output:
	// takeover: acquired worker-2
	// old holder refused: true
}

// An effect whose outcome is unknown stays refused until a person resolves
// it.
func ExampleMemory_Resolve() {
	ctx := context.Background()
	s, _ := store.NewMemory(store.MemoryOptions{})
	claim := store.ClaimParams{Tenant: "acme", Key: "book/BA117", Holder: "worker-1", Lease: time.Minute}

	res, _ := s.Claim(ctx, claim)
	_ = s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "acme", Key: "book/BA117", Token: res.Record.Token, Reason: "timed out after sending"})
	again, _ := s.Claim(ctx, claim)
	fmt.Printf("retry: %s (%s)\n", again.Status, again.Record.Reason)

	// A person checked with the airline: the seat was booked.
	_ = s.Resolve(ctx, store.ResolveParams{Tenant: "acme", Key: "book/BA117", Decision: store.DecisionComplete, Outcome: []byte("seat 12A")})
	again, _ = s.Claim(ctx, claim)
	fmt.Printf("after resolving: %s %q\n", again.Status, again.Record.Outcome)
	// Output:
	// retry: indeterminate (timed out after sending)
	// after resolving: completed "seat 12A"
}
