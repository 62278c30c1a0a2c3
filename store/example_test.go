package store_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
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
	_ = s.Resolve(ctx, store.ResolveParams{Tenant: "acme", Key: "book/BA117", Decision: store.ActionComplete, Outcome: []byte("seat 12A")})
	again, _ = s.Claim(ctx, claim)
	fmt.Printf("after resolving: %s %q\n", again.Status, again.Record.Outcome)
	// Output:
	// retry: indeterminate (timed out after sending)
	// after resolving: completed "seat 12A"
}

// An operator's loop: list what waits for a person, page by page, and
// decide each record, fenced by the token of the record they looked at.
func ExampleMemory_List() {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
	s, err := store.NewMemory(store.MemoryOptions{Clock: clock})
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"book/BA117", "book/LH400", "book/AF006"} {
		clock.Advance(time.Minute)
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: key, Holder: "worker-1", Lease: time.Minute,
			Origin: store.Origin{WorkflowID: "trip-" + key[5:], ActivityType: "Book"}})
		if err != nil {
			panic(err)
		}
		err = s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "acme", Key: key, Token: res.Record.Token, Reason: "airline timed out"})
		if err != nil {
			panic(err)
		}
	}

	waiting := store.ListParams{
		Tenant: "acme",
		States: []store.State{store.StateIndeterminate, store.StatePending},
		Stale:  true, // pending records only once their holder is presumed dead
		Order:  store.OldestFirst,
		Limit:  2,
	}
	for {
		page, err := s.List(ctx, waiting)
		if err != nil {
			panic(err)
		}
		for _, rec := range page.Records {
			fmt.Println(rec.Key, rec.State, rec.Origin.WorkflowID, rec.Reason)
			err := s.Resolve(ctx, store.ResolveParams{Tenant: "acme", Key: rec.Key, Token: rec.Token,
				Decision: store.ActionFree, By: "alice", Reason: "no booking at the airline"})
			if err != nil {
				panic(err)
			}
		}
		if page.Next == "" {
			break
		}
		waiting.Cursor = page.Next
	}
	page, err := s.List(ctx, store.ListParams{Tenant: "acme"})
	if err != nil {
		panic(err)
	}
	fmt.Println("left:", len(page.Records))
	// Output:
	// book/BA117 indeterminate trip-BA117 airline timed out
	// book/LH400 indeterminate trip-LH400 airline timed out
	// book/AF006 indeterminate trip-AF006 airline timed out
	// left: 0
}
