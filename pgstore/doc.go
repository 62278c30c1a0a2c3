// Package pgstore is the PostgreSQL implementation of the idempotency
// store contract ([store.Store]), built on pgx v5. Records live in one table
// that every worker replica shares, so a key claimed by one replica is
// claimed for all of them, and records survive restarts.
//
// # Wiring
//
// The store runs on a [pgxpool.Pool] the application owns: [New] never
// opens or closes one. The table is created only by [Store.EnsureSchema],
// which a deployment calls once (it is idempotent and safe to run from
// every replica at start-up); the store never creates tables on its own,
// and until the table exists its methods fail with an error matching
// [ErrNoSchema].
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	...
//	defer pool.Close()
//	s, err := pgstore.New(pool, pgstore.Options{Schema: "idempotency", TTL: 48 * time.Hour})
//	...
//	defer s.Close()
//	if err := s.EnsureSchema(ctx); err != nil { ... }
//
// # Claims
//
// [Store.Claim] decides in one statement executed by the server: an
// INSERT … ON CONFLICT DO UPDATE that takes the key only when it is free,
// its record has expired, or it is pending under the token the caller
// supersedes, and that returns the record standing there otherwise. No
// replica ever reads and then writes, so there is no window for another to
// slip through. Every later change — renew, complete, release, mark
// indeterminate — is a single statement fenced by the claim's token.
//
// # Time
//
// Every timestamp the store writes and every expiry it decides comes from
// [Options.Clock], passed to the server as a parameter; the server's own
// clock is never consulted. Replicas' clocks should agree to well within
// the leases and retention window in use.
//
// # Waiting
//
// Each statement that changes a record announces it with pg_notify on the
// store's channel (a digest of tenant and key, never the key itself).
// [Store.Wait] listens on one connection per Store, taken from the pool on
// the first Wait and kept until [Store.Close], and fans notifications out to
// waiters; it also polls with backoff ([Options.PollInterval]), which is how
// it notices leases running out and covers notifications lost while the
// listener reconnects.
//
// # Errors
//
// Errors are translated at the store's edge: a server that cannot be
// reached, refuses connections, times out or shuts down, and a closed pool,
// give errors matching [store.ErrUnavailable]; the caller's own context
// ending gives the context's error; serialization failures and deadlocks
// are retried a bounded number of times; a missing table gives
// [ErrNoSchema].
//
// # Retention
//
// Expired records already read as free. [Store.Sweep] reclaims their space
// in bounded batches; run it periodically. [Store.Forget] erases a tenant's
// records outright.
package pgstore
