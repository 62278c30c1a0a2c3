package pgstore_test

import (
	"context"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// Example wires the store: a pool the application owns, the store on it,
// and the schema the deployment ensures once. It needs a database, so it
// has no Output and is compiled but not run.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	s, err := pgstore.New(pool, pgstore.Options{
		Schema: "idempotency",
		TTL:    48 * time.Hour, // longer than the longest replay to support
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.EnsureSchema(ctx); err != nil {
		log.Fatal(err)
	}

	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "booking-BA117", Holder: "worker-1", Lease: time.Minute})
	if err != nil {
		log.Fatal(err) // matches store.ErrUnavailable when the database is down
	}
	if res.Status == store.StatusAcquired {
		// ... run the effect, then record its outcome:
		err = s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: "booking-BA117", Token: res.Record.Token, Outcome: []byte("seat 14C")})
		if err != nil {
			log.Fatal(err)
		}
	}
}

// ExampleDetectCapabilities runs the store on whatever engine the pool
// dials: every capability on PostgreSQL itself, the portable mode on
// Citus, YugabyteDB and CockroachDB. It needs a database, so it has no
// Output and is compiled but not run.
func ExampleDetectCapabilities() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal:26257/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	engine, caps, err := pgstore.DetectCapabilities(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("idempotency records on %s, capabilities %s", engine, caps)
	s, err := pgstore.New(pool, pgstore.Options{Schema: "idempotency", Capabilities: &caps})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.EnsureSchema(ctx); err != nil {
		log.Fatal(err)
	}
}

// ExampleDetectReplication reaches whichever of two hosts accepts writes
// (after a failover, the promoted standby), logs what the store runs on,
// and requires a synchronous standby: a claim on a server whose commits
// would not wait for one is refused, retryably. It needs a database, so
// it has no Output and is compiled but not run.
func ExampleDetectReplication() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@pg-a.internal:5432,pg-b.internal:5432/app?target_session_attrs=read-write")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	r, err := pgstore.DetectReplication(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("idempotency records on %s", r) // e.g. synchronous standby (synchronous_commit=on, ...)
	s, err := pgstore.New(pool, pgstore.Options{RequireSynchronousReplication: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
}
