package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// A worker claims a key before running an effect and records the outcome;
// a duplicate call gets the recorded outcome instead of a second effect. It
// needs a Redis, so it has no Output to check.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()

	s, err := redisstore.New(client, redisstore.Options{Prefix: "booking", TTL: 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	claim := store.ClaimParams{Tenant: "acme", Key: "book/BA117", Holder: "worker-1", Lease: time.Minute}
	res, err := s.Claim(ctx, claim)
	if err != nil {
		log.Fatal(err) // ErrUnavailable: a store that is down is not permission.
	}
	switch res.Status {
	case store.StatusAcquired:
		outcome := []byte("seat 12A") // The effect runs here, once.
		err = s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: "book/BA117", Token: res.Record.Token, Outcome: outcome})
	case store.StatusHeld:
		res, err = s.Wait(ctx, store.WaitParams{Tenant: "acme", Key: "book/BA117", Token: res.Record.Token})
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status)
}
