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
// connection of the pool free is sent at once, alone, on the statements
// above: a lone caller never waits for a batch. A call that arrives while
// every connection is taken waits, as it would have for a connection, and
// from then until none of the store's claims (or completions) is out, the
// claims (completions) go together: a call waits for the next of them to
// return, and goes with the others that waited. A batch of claims is one
// INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING and one read of the
// rows that stood, in one round trip; a batch of completions one
// UPDATE … FROM unnest(…). A batch
// writes its rows in key order, so two batches never wait on each other's
// keys in opposite orders. It answers each call as the call alone would
// have — duplicates within one batch included: one wins, the others are
// held by it — and sends back to its caller what it cannot settle (a row
// to take over, a completion that changed nothing, a statement that failed
// before it ran), to be run alone. A batch whose answer is lost takes back
// the claims it may have made, by the tokens only it knows, and fails its
// calls, as a claim alone does. Batching pays where a process has more
// calls at once than connections: see docs/SCALING.md and
// docs/BENCHMARKS.md.
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
// engines speaking its protocol lack in part: the system column xmax (to
// tell a claim that replaced a record from one that inserted it), ctid (to
// sweep by physical address), NOTIFY (sent inside the statements that
// settle a record, received on one LISTEN connection) and advisory locks
// (EnsureSchema). [Options.Capabilities] says which it may use: nil, the
// default, is every one ([AllCapabilities]) and sends exactly the
// statements the store has always sent; the zero [Capabilities] is the
// portable mode, which uses none:
//
//   - a claim that replaces a standing record is an upsert whose RETURNING
//     carries the record's token: the claim took the key when it is the
//     token the call sent; otherwise a second statement reads what stands;
//   - Sweep deletes a batch by primary key, re-checking each row's expiry;
//   - nothing is announced and no connection listens: [Store.Wait] polls,
//     from [DefaultPollOnlyInterval] backing off to
//     [DefaultPollOnlyMaxInterval];
//   - EnsureSchema creates each object with IF NOT EXISTS and runs its
//     transaction again when it loses a race on the catalogs to a replica.
//
// Serialization failures (SQLSTATE 40001) and deadlocks (40P01), routine
// on engines whose transactions are SERIALIZABLE, are run again as a whole
// transaction — a statement, the claim's batch, EnsureSchema's transaction
// — a bounded number of times with a growing, jittered pause, in every
// mode. The transaction of a transactional body cannot be: the body is the
// application's code. Its commit fails with an error matching
// [ErrTransactionConflict], nothing of it lands, and the dispatcher frees
// the key for the activity's retry.
//
// In the portable mode every statement runs on Citus: a retention window's
// end is computed with IMMUTABLE functions only (Citus refuses an UPDATE
// of a distributed table whose CASE calls a STABLE one), and a
// transactional commit is approved for the commit guard in a statement of
// its own, on the coordinator, before the fenced completion, which runs on
// the worker that holds the record.
//
// [DetectCapabilities] reads which engine the pool dials and returns the
// set for it. The portable mode passes the whole conformance suite
// (storetest: Run, RunTransactor, RunClockSkew) against PostgreSQL with
// every capability off, and against a Citus 13 cluster (a coordinator and
// two workers, the table distributed by tenant by [Store.EnsureSchema]:
// make test-citus); it has not been run against YugabyteDB or
// CockroachDB. docs/SCALING.md says per engine what was run, what holds by
// design and what is untested.
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
// The store's records are as durable as PostgreSQL's commit: with an
// asynchronous standby, a failover loses the claims and completions the
// standby had not received, and the promoted standby lets the next call
// claim the key and run its effect a second time; with a synchronous one
// (synchronous_standby_names, synchronous_commit on) it loses none.
// [DetectReplication] tells at start which the pool dials; log its
// String. [Options.RequireSynchronousReplication] refuses claims unless
// commits wait for a synchronous standby. Workers follow a failover
// through a multi-host connection string with
// target_session_attrs=read-write (pgx reads it): a new connection goes
// to whichever host accepts writes, and calls fail with errors matching
// [store.ErrUnavailable], retried, until one does. docs/SCALING.md
// ("Failover") gives what a failover lost, measured.
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
// A COMMIT whose answer is lost is settled by the record, and never by a
// bare read, which may run while the COMMIT is still on its way and show
// the record pending: the dispatcher frees the key with a fenced release,
// which waits for the transaction's row lock; the release landing proves the
// transaction did not commit (and, the fence being inside it, never can),
// and its refusal leads to a read that shows the record completed under the
// token — it landed — or taken over.
//
// The body holds its connection from the claim to the commit, so the pool
// must have room for every transactional body running at once plus the
// store's own statements (renewals, the listener); a pool too small makes
// bodies wait for a connection, and renewals wait too. Only [Tx] writes
// commit with the record: a write through another pool, even to the same
// database, is outside the promise, and a declaration naming another pool
// (activity.Policy.TransactionalDB) is refused by [Store.CheckTransactional].
//
// The body must not commit or roll back the transaction itself, and cannot:
// the handle [Tx] returns refuses Commit and Rollback, and the commit guard
// refuses a COMMIT the body sends as SQL (COMMIT, END, COMMIT AND CHAIN).
// Every transaction begins by inserting a row into the guard table
// (EnsureSchema creates it beside the records), whose constraint trigger,
// deferred to COMMIT, fails any COMMIT the dispatcher's fenced completion
// did not approve; the body's writes roll back with it. A body that ends
// its transaction with ROLLBACK AND CHAIN is caught when the completion
// finds itself in another transaction than the one that began (the
// transaction's mark, a transaction-local setting, is gone), and a body
// that left its transaction failed or ended is caught by the connection's
// state; each ends as [store.ErrTransactionEnded], which the dispatcher
// reports indeterminate. Out of reach: a write the body commits through
// another connection (a second pool, pgx.Connect), and a COMMIT the body
// sends after ROLLBACK AND CHAIN in the chained, unguarded transaction; both
// break the contract the declaration states. On a schema made before the
// guard existed, transactions begin without it (a body's own COMMIT is
// then caught afterwards, as before, not refused) until EnsureSchema
// (idempotencyctl schema) creates it.
//
// # Listing
//
// [Store.List] is one keyset query. EnsureSchema creates, beside the expiry
// index, a partial index of the records that are not completed,
// <table>_waiting_idx ON (tenant, created_at, key COLLATE "C") WHERE
// state <> 2, so the listings of what waits in a tenant (indeterminate,
// pending, stale) read only those records, in order, however many completed
// records the table holds (TestListPlans shows the plans). Completed records
// are not in it, and a completion adds no entry to it. A listing that keeps
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
// (NULL: none). EnsureSchema adds both columns to a table made before
// them, and rows without them read as before.
package pgstore
