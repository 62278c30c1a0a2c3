package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Capabilities are the features of PostgreSQL itself that the store may
// use beyond the SQL that distributed engines speaking PostgreSQL's protocol
// (Citus, YugabyteDB, CockroachDB) share. Each one switched off makes the
// store do without it, at a price said on the field; what each engine is
// known to lack, and what has and has not been tried on it, is in
// docs/SCALING.md ("Distributed PostgreSQL").
//
// The zero value uses none of them: the portable mode. [AllCapabilities]
// is PostgreSQL's full set, the store's default (a nil
// [Options.Capabilities]); [DetectCapabilities] asks a server which it
// has. Every store on one table must run with the same Notify: a store
// that does not notify leaves the waiters of a store that waits for
// notifications to their polling.
type Capabilities struct {
	// Xmax: the system column xmax tells the statement that replaces a
	// standing record (an expired one, or a takeover) from one that
	// inserted a fresh one, in the same statement, so only a replacement
	// is announced. Without it the claim that replaces is an upsert whose
	// RETURNING carries the record's token, and the claim took the key
	// when that is the token this call sent; the record standing is read
	// by a second statement when nothing came back, and a replacement is
	// announced (with Notify) by a statement of its own after it.
	Xmax bool
	// Ctid: Sweep deletes a batch of expired records by their physical
	// address (ctid), locking it with FOR UPDATE SKIP LOCKED. Without it,
	// Sweep deletes by primary key (tenant, key) a batch read without
	// locks, and re-checks the expiry of every row it deletes, so a row a
	// claim replaced meanwhile is left alone; a claim on a row the sweep
	// is deleting waits for it, or fails with a serialization failure
	// that is retried.
	Ctid bool
	// Notify: the statements that settle a record a waiter watches
	// announce it with pg_notify, and [Store.Wait] LISTENs on a connection
	// of its own. Without it nothing is announced and no connection
	// listens: Wait re-reads the record every [Options.PollInterval],
	// backing off to [Options.MaxPollInterval] (whose defaults are then
	// shorter: [DefaultPollOnlyInterval] and [DefaultPollOnlyMaxInterval]),
	// so a waiter learns of a settlement up to one interval late and each
	// waiter costs a read per interval.
	Notify bool
	// AdvisoryLocks: [Store.EnsureSchema] serializes concurrent replicas
	// on a transaction-scoped advisory lock. Without it, every object is
	// created with IF NOT EXISTS and a replica that loses a race on the
	// catalogs (a unique violation, or an object created under it) runs
	// the whole transaction again, a bounded number of times; the commit
	// guard of transactional bodies is created in a transaction of its
	// own, and an engine that refuses it (no triggers or PL/pgSQL) leaves
	// the store running transactional bodies without it (see the
	// package's "Transactional activities").
	AdvisoryLocks bool
}

// AllCapabilities returns PostgreSQL's full set: every capability on.
// It is what a store runs with when [Options.Capabilities] is nil.
func AllCapabilities() Capabilities {
	return Capabilities{Xmax: true, Ctid: true, Notify: true, AdvisoryLocks: true}
}

// Portable reports whether c lacks any capability, so the store runs
// (some of) its portable statements.
func (c Capabilities) Portable() bool { return c != AllCapabilities() }

// String lists the capabilities that are on, or says "none".
func (c Capabilities) String() string {
	var on []string
	for _, f := range []struct {
		name string
		on   bool
	}{{"xmax", c.Xmax}, {"ctid", c.Ctid}, {"notify", c.Notify}, {"advisory-locks", c.AdvisoryLocks}} {
		if f.on {
			on = append(on, f.name)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

// Engine names a server [DetectCapabilities] recognised.
type Engine string

// The engines [DetectCapabilities] recognises.
const (
	// EnginePostgreSQL is PostgreSQL itself (or a server that says it
	// is, and runs no Citus).
	EnginePostgreSQL Engine = "PostgreSQL"
	// EngineCitus is PostgreSQL with the citus extension installed.
	EngineCitus Engine = "Citus"
	// EngineYugabyteDB is YugabyteDB's YSQL.
	EngineYugabyteDB Engine = "YugabyteDB"
	// EngineCockroachDB is CockroachDB.
	EngineCockroachDB Engine = "CockroachDB"
)

// DetectCapabilities asks the server pool dials what it is (version(),
// and whether the citus extension is installed) and returns the engine
// and the capabilities the store may use on it: every one on PostgreSQL
// itself, none on Citus, YugabyteDB and CockroachDB, whose tables may
// live on other nodes than the session (Citus: a notification or an
// advisory lock taken on a worker node is not seen on the coordinator; a
// notification sent by a statement on the store's distributed table
// is sent on the worker and never reaches the store's LISTEN, measured),
// or which lack the feature (YugabyteDB: no xmax or ctid, no
// LISTEN/NOTIFY; CockroachDB: none of the four). It reads the server's
// answer and tries nothing. An error is the query's: the store is not
// reachable, or the server is none of these.
//
// Call it once at start, and give what it returns to [New] through
// [Options.Capabilities]. A deployment that knows its engine may set the
// capabilities itself instead.
func DetectCapabilities(ctx context.Context, pool *pgxpool.Pool) (Engine, Capabilities, error) {
	var version string
	if err := pool.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		return "", Capabilities{}, fmt.Errorf("pgstore: detecting the server's capabilities: %w", err)
	}
	engine, err := engineOf(ctx, pool, version)
	if err != nil {
		return "", Capabilities{}, fmt.Errorf("pgstore: detecting the server's capabilities: %w", err)
	}
	if engine == EnginePostgreSQL {
		return engine, AllCapabilities(), nil
	}
	return engine, Capabilities{}, nil
}

// engineOf tells the engine by its version string and, for PostgreSQL,
// by whether citus is installed.
func engineOf(ctx context.Context, pool *pgxpool.Pool, version string) (Engine, error) {
	switch {
	case strings.Contains(version, "CockroachDB"):
		return EngineCockroachDB, nil
	case strings.Contains(version, "-YB-"), strings.Contains(version, "Yugabyte"):
		return EngineYugabyteDB, nil
	case !strings.HasPrefix(version, "PostgreSQL"):
		return "", fmt.Errorf("version() says %q: not a server this store knows", version)
	}
	var citus bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus); err != nil {
		return "", err
	}
	if citus {
		return EngineCitus, nil
	}
	return EnginePostgreSQL, nil
}
