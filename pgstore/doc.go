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
// [Store.Claim] lets the server decide, in one round trip: an INSERT … ON
// CONFLICT DO NOTHING takes a free key, and a read in the same batch (and
// implicit transaction) returns the record standing there otherwise. Only
// when that record has expired, or is pending under the token the caller
// supersedes, does a second statement, an INSERT … ON CONFLICT DO UPDATE,
// take it over. The server's unique index decides every race: no replica
// ever reads and then writes on what it read, so there is no window for
// another to slip through. Every later change — renew, complete, release,
// mark indeterminate — is a single statement fenced by the claim's token.
//
// # Batching concurrent calls
//
// With [Options.Batch], claims and completions made at the same moment by
// one process share a statement and a commit. A call that finds a
// connection of the pool free is sent at once, alone: a lone caller never
// waits for a batch. Once a call finds every connection taken, and until
// none of the store's claims (or completions) is out, they go together: one
// INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING and one read, or one
// UPDATE … FROM unnest(…). A batch answers each call as the call alone
// would have, sends back to its caller what it cannot settle (a takeover, a
// statement that failed) to run alone, and takes back its claims by token
// when its answer is lost. It pays where a process has more calls at once
// than connections, and costs where the load is a little past the pool:
// measure first (docs/BENCHMARKS.md).
//
// # Time
//
// Leases and expiries are judged by PostgreSQL's clock, so replicas whose
// own clocks disagree — by any amount — still agree on whether a lease has
// run out. The store keeps a [store.ServerClock]: it measures the offset of
// the server's clock_timestamp() from the local clock (half the round trip
// taken off) on first use and every [store.DefaultServerClockSync] after,
// and every timestamp it writes or compares is the local clock corrected by
// that offset, passed to the server as a parameter. Replicas therefore agree
// to within their round trips to the server. [Options.Clock] replaces it, for
// tests that control time.
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
// # Distributed PostgreSQL: the portable mode
//
// The store relies on four features of PostgreSQL itself that distributed
// engines lack in part: xmax (to tell a replacing claim from an insert),
// ctid (sweeps by physical address), NOTIFY and advisory locks
// (EnsureSchema). [Options.Capabilities] says which it may use: nil, the
// default, is every one ([AllCapabilities]); the zero [Capabilities] is the
// portable mode, which uses none: a replacing claim is an upsert whose
// RETURNING carries the token, Sweep deletes by primary key, [Store.Wait]
// polls (from [DefaultPollOnlyInterval] backing off to
// [DefaultPollOnlyMaxInterval]), and EnsureSchema retries a lost race on the
// catalogs. [DetectCapabilities] reads which engine the pool dials and
// returns its set. The portable mode passes the conformance suite against
// PostgreSQL and a Citus cluster (where EnsureSchema distributes the table
// by tenant); docs/SCALING.md says per engine what holds and what is untested.
//
// In every mode, serialization failures (40001) and deadlocks (40P01) are run
// again as a whole transaction a bounded number of times. A transactional
// body's transaction cannot be: its commit fails with an error matching
// [ErrTransactionConflict], nothing lands, and the dispatcher frees the key
// for the activity's retry.
//
// # Errors
//
// Errors are translated at the store's edge: a server that cannot be
// reached, refuses connections, times out or shuts down, and a closed pool,
// give errors matching [store.ErrUnavailable]; the caller's own context
// ending gives the context's error; serialization failures and deadlocks
// are retried a bounded number of times; a missing table gives
// [ErrNoSchema]. A claim whose answer never arrived (the context ended, or
// the connection broke, after the statement was sent) is undone by its
// token before Claim returns, removing only what it created (the rule of
// [store.Store.Claim]): a claim of a free key is deleted, a takeover is
// left pending with its lease ended.
//
// # Replication and failover
//
// The records are as durable as PostgreSQL's commit: a failover to an
// asynchronous standby loses what it had not received, and a lost
// completion's key can run its effect again; a synchronous standby loses
// none. [DetectReplication] tells at start which the pool dials (log its
// String); [Options.RequireSynchronousReplication] refuses claims unless
// commits wait for a synchronous standby. Workers follow a failover through
// a multi-host connection string with target_session_attrs=read-write.
// docs/SCALING.md ("Failover") has the measured losses.
//
// # Transactional activities
//
// The store implements [store.Transactor]: an EFFECTFUL activity declared
// transactional (activity.Policy.Transactional) runs its body in a READ
// COMMITTED transaction on a connection of the store's pool, which the body
// reaches with [Tx], and the dispatcher completes the record in that
// transaction before it commits. The completion is fenced by the claim's
// token in the database: when the claim is no longer pending under it, the
// statement fails and aborts the transaction, so the body's writes can
// never commit without the record. A transaction begins after the claim and
// does not lock the record while the body runs (renewals go on beside it on
// other connections); the completion locks it, so from then until the
// commit ends a takeover's claim and a fenced release wait for the
// transaction, and a duplicate that waits is woken by the notification
// sent at the commit.
//
// A COMMIT whose answer is lost is settled by the record: the dispatcher
// frees the key with a fenced release, which waits for the transaction's row
// lock; the release landing proves the transaction did not commit, and its
// refusal leads to a read that shows the record completed (it landed) or
// taken over.
//
// The body holds its connection from the claim to the commit, so the pool
// must have room for every transactional body running at once plus the
// store's own statements. Only [Tx] writes commit with the record: a write
// through another pool is outside the promise, and a declaration naming
// another pool (activity.Policy.TransactionalDB) is refused by
// [Store.CheckTransactional].
//
// The body must not commit or roll back the transaction itself, and cannot:
// the handle [Tx] returns refuses Commit and Rollback, and the commit guard
// (a guard-table row whose deferred constraint trigger fails any COMMIT the
// dispatcher did not approve; EnsureSchema creates it) refuses a COMMIT,
// END or COMMIT AND CHAIN the body sends as SQL. A ROLLBACK AND CHAIN, or a
// transaction left failed or ended, is caught as [store.ErrTransactionEnded]
// and reported indeterminate. Out of reach: a write the body commits through
// another connection. On a schema without the guard, transactions begin
// without it (a body's own COMMIT is caught afterwards, not refused) until
// EnsureSchema (idempotencyctl schema) creates it.
//
// # Listing
//
// [Store.List] is one keyset query. EnsureSchema creates, beside the expiry
// index, a partial index of the records that are not completed,
// <table>_waiting_idx ON (tenant, created_at, key COLLATE "C") WHERE
// state <> 2, so the listings of what waits in a tenant (indeterminate,
// pending, stale) read only those records, in order, however many completed
// records the table holds. A listing that keeps
// completed records reads the tenant's rows by primary key and sorts them;
// [Store.ListAcrossTenants] reads the table's live rows and sorts them.
//
// On a large existing table, EnsureSchema's CREATE INDEX blocks writes while
// it builds; create the index first with
//
//	CREATE INDEX CONCURRENTLY <table>_waiting_idx ON <schema>.<table> (tenant, created_at, key COLLATE "C") WHERE state <> 2
//
// (under the same name; EnsureSchema then finds it and leaves it alone).
//
// # Retention
//
// Expired records already read as free. [Store.Sweep] reclaims their space
// in bounded batches; run it periodically. [Store.Forget] erases a tenant's
// records outright. A record claimed with a retention window of its own
// keeps it in the column retention_us (microseconds; NULL: the store's
// TTL), and the statements that restart a record's window compute its end
// from that column; the digest of checked arguments is in check_digest
// (NULL: none).
package pgstore
