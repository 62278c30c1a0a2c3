package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/coalesce"
	"github.com/tesserix/idempotency/store"
)

// Where the store's code is: claim.go, Claim and its paths (a table opens
// it); settle.go, what a holder does with its claim (Renew, Complete,
// Release, MarkIndeterminate); resolve.go, a person's decision (Resolve);
// list.go, the listings and the backlog count; listen.go, Wait; tx.go and
// txguard.go, transactional bodies; schema.go, portable.go and citus.go,
// EnsureSchema and the engines; sql.go and args.go, the statements and
// their parameters. This file holds the Store, Lookup, Forget and Sweep,
// and what every call shares.

// maxAttempts bounds how often one call runs its statement again after a
// serialization failure, a deadlock, or (Claim only) a snapshot that could
// not yet see a row a concurrent claim had just committed.
const maxAttempts = 10

// Store is a [store.Store] kept in one PostgreSQL table. Every replica that
// uses the same table sees the same records; claims are decided by the
// server in one statement, so replicas never race through a read-then-write
// window. It is safe for concurrent use. Call [Store.Close] when done with
// it to stop its listener.
type Store struct {
	pool      *pgxpool.Pool
	opts      Options
	schema    string // quoted
	tableName string // quoted and schema-qualified
	channel   string // quoted, for LISTEN
	caps      Capabilities
	sql       statements
	l         *listener
	// guardSQL and guard are the commit guard of transactional bodies
	// (txguard.go).
	guardSQL guardStatements
	guard    guardState
	// server is the clock that follows PostgreSQL's, unless Options.Clock
	// was given.
	server *store.ServerClock
	// onBlock, when set (by tests, before use), is called each time a Wait
	// is about to block.
	onBlock func(store.WaitParams)
	// onRetry, when set (by tests, before use), is called each time a
	// Claim runs its statement again.
	onRetry func(attempt int)
	// onReplace, when set (by tests, before use), is called each time a
	// Claim is about to send the statement that replaces a standing row.
	onReplace func()
	// claims and completes coalesce concurrent calls (batch.go); nil
	// without Options.Batch.
	claims    *coalesce.Group[store.ClaimParams, claimAnswer]
	completes *coalesce.Group[store.CompleteParams, bool]
	// onBatch, when set (by tests, before use), is called with the size
	// of each batch of claims (claims true) or completions sent.
	onBatch func(claims bool, size int)
	// replication caches Options.RequireSynchronousReplication's check
	// (replication.go).
	replication replicationGate
}

var _ store.Store = (*Store)(nil)

// New returns a store on a pool the caller owns: the store never opens or
// closes a pool. It checks opts once and returns an [*store.OptionsError]
// naming the field it refuses; it does not touch the database, and it does
// not create the table: the deployment calls [Store.EnsureSchema] for that.
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	return newStore(pool, opts, store.SystemClock{})
}

// newStore is New with the local clock the server clock corrects.
func newStore(pool *pgxpool.Pool, opts Options, local store.Clock) (*Store, error) {
	if pool == nil {
		return nil, &store.OptionsError{Field: "pgstore.New pool", Reason: "must not be nil"}
	}
	var server *store.ServerClock
	if opts.Clock == nil {
		server = store.NewServerClock(local, 0, func(ctx context.Context) (time.Time, error) {
			var now time.Time
			err := pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now)
			return now, err
		})
		opts.Clock = server
	}
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	table := pgx.Identifier{o.Schema, o.Table}.Sanitize()
	s := &Store{
		pool:      pool,
		opts:      o,
		schema:    pgx.Identifier{o.Schema}.Sanitize(),
		tableName: table,
		channel:   pgx.Identifier{o.NotifyChannel}.Sanitize(),
		caps:      *o.Capabilities,
		sql: buildStatements(table, pgx.Identifier{indexName(o.Table)}.Sanitize(),
			pgx.Identifier{listIndexName(o.Table)}.Sanitize(), pgx.Identifier{o.Schema, guardName(o.Table)}.Sanitize(),
			*o.Capabilities),
		guardSQL: buildGuard(o.Schema, o.Table),
		server:   server,
	}
	s.l = newListener(s)
	if o.Batch {
		poolBusy := func() bool { return busy(pool) }
		s.claims = coalesce.New(poolBusy, batchMaxCalls, claimer{s}.claimBatch)
		s.completes = coalesce.New(poolBusy, batchMaxCalls, s.completeBatch)
	}
	return s, nil
}

// now returns the time by the store's clock: PostgreSQL's (re-measured when
// stale), or Options.Clock when one was given.
func (s *Store) now(ctx context.Context) time.Time {
	if s.server != nil {
		s.server.SyncIfStale(ctx)
	}
	return s.opts.Clock.Now()
}

// Options returns the options the store runs with, defaults filled in
// (Capabilities is never nil: it is the set the store runs with).
func (s *Store) Options() Options {
	o := s.opts
	caps := s.caps
	o.Capabilities = &caps
	return o
}

// Close stops the store's listener and closes its dedicated connection. It
// does not close the pool. Waits in progress fall back to polling. Close is
// idempotent; the store's other methods keep working after it.
func (s *Store) Close() { s.l.close() }

// notice is where a change to tenant's key is announced: nowhere, without
// Capabilities.Notify.
func (s *Store) notice(tenant, key string) notice {
	if !s.caps.Notify {
		return notice{silent: true}
	}
	return notice{channel: s.opts.NotifyChannel, payload: payloadFor(tenant, key)}
}

// Lookup implements [store.Store.Lookup].
func (s *Store) Lookup(ctx context.Context, p store.LookupParams) (store.Record, error) {
	const op = "lookup"
	if err := begin(ctx, op, p); err != nil {
		return store.Record{}, err
	}
	rec, err := s.lookup(ctx, p.Tenant, p.Key)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("pgstore: %s %q in tenant %q: %w", op, p.Key, p.Tenant, store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, s.interpret(ctx, op, err)
	}
	return rec, nil
}

// watch reads the live record of tenant and key and marks it watched.
func (s *Store) watch(ctx context.Context, tenant, key string) (store.Record, error) {
	var rec store.Record
	err := retry(ctx, func(ctx context.Context) error {
		a := keyAt{tenant: tenant, key: key, now: s.now(ctx)}
		return scanRecord(s.pool.QueryRow(ctx, s.sql.watch, a.params().values()...), &rec)
	})
	return rec, err
}

// lookup reads the key's live record, returning pgx.ErrNoRows when there is
// none and untranslated errors otherwise.
func (s *Store) lookup(ctx context.Context, tenant, key string) (store.Record, error) {
	var rec store.Record
	err := retry(ctx, func(ctx context.Context) error {
		a := keyAt{tenant: tenant, key: key, now: s.now(ctx)}
		return scanRecord(s.pool.QueryRow(ctx, s.sql.lookup, a.params().values()...), &rec)
	})
	return rec, err
}

// Forget implements [store.Store.Forget]. It counts expired records it
// erases too, and wakes every waiter on the tenant's erased keys.
func (s *Store) Forget(ctx context.Context, p store.ForgetParams) (int, error) {
	const op = "forget"
	if err := begin(ctx, op, p); err != nil {
		return 0, err
	}
	var n int64
	err := retry(ctx, func(ctx context.Context) error {
		a := forgetArgs{tenant: p.Tenant, channel: s.opts.NotifyChannel, silent: !s.caps.Notify}
		return s.pool.QueryRow(ctx, s.sql.forget, a.params().values()...).Scan(&n)
	})
	if err != nil {
		return 0, s.interpret(ctx, op, err)
	}
	return int(n), nil
}

// Sweep implements [store.Store.Sweep]: one bounded batch per call, so it
// never holds many row locks for long. Call it repeatedly until it returns
// fewer than the limit to reclaim everything.
func (s *Store) Sweep(ctx context.Context, p store.SweepParams) (int, error) {
	const op = "sweep"
	if err := begin(ctx, op, p); err != nil {
		return 0, err
	}
	var n int64
	err := retry(ctx, func(ctx context.Context) error {
		a := sweepArgs{now: s.now(ctx), limit: p.EffectiveLimit()}
		tag, err := s.pool.Exec(ctx, s.sql.sweep, a.params().values()...)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, s.interpret(ctx, op, err)
	}
	return int(n), nil
}

// retry runs fn again, a bounded number of times, while it fails with a
// serialization failure or a deadlock. It returns fn's last error as is.
func retry(ctx context.Context, fn func(ctx context.Context) error) error {
	return retryWhile(ctx, retryable, fn)
}

// retryWhile is retry, running fn again while again says its error is
// worth it.
func retryWhile(ctx context.Context, again func(error) bool, fn func(ctx context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !again(err) || attempt == maxAttempts {
			return err
		}
		if perr := pause(ctx, attempt); perr != nil {
			return perr
		}
	}
}

// pause sleeps a short, growing, jittered interval between attempts.
func pause(ctx context.Context, attempt int) error {
	d := time.Duration(attempt) * time.Millisecond
	d += time.Duration(store.NewToken() % int64(d+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// validator is every params struct of the contract.
type validator interface{ Validate() error }

// begin refuses a done context and malformed parameters before any round
// trip.
func begin(ctx context.Context, op string, p validator) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return nil
}

// scanRecord reads a row of columns (see sql.go), with extra destinations
// before (for the claim's "acquired") and after (its "notified"), into rec.
func scanRecord(row pgx.Row, rec *store.Record, extra ...any) error {
	var (
		state, action int16
		resolvedAt    *time.Time
		check         *string
		retention     *int64
	)
	dest := make([]any, 0, 25)
	if len(extra) > 0 {
		dest = append(dest, extra[0])
	}
	dest = append(dest, &rec.Tenant, &rec.Key, &state, &rec.Holder, &rec.Token, &rec.LeaseUntil,
		&rec.ExpiresAt, &rec.CreatedAt, &rec.UpdatedAt, &rec.Outcome, &rec.Reason,
		&rec.Origin.WorkflowID, &rec.Origin.RunID, &rec.Origin.ActivityType, &rec.Origin.ActivityID, &rec.Origin.Attempt,
		&action, &rec.Resolution.By, &rec.Resolution.Reason, &rec.Resolution.Reference, &resolvedAt,
		&check, &retention)
	if len(extra) > 1 {
		dest = append(dest, extra[1:]...)
	}
	if err := row.Scan(dest...); err != nil {
		return err
	}
	rec.State = store.State(state)
	rec.Resolution.Action = store.Action(action)
	if resolvedAt != nil {
		rec.Resolution.At = *resolvedAt
	}
	if check != nil {
		rec.Check = *check
	}
	if retention != nil {
		rec.Retention = time.Duration(*retention) * time.Microsecond
	}
	return nil
}

// payloadFor is the notification payload for a key: a digest of tenant and
// key, so neither appears on the channel and the payload stays short. The
// forget statement computes the same digest on the server.
func payloadFor(tenant, key string) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(len(tenant)) + ":" + tenant + key))
	return hex.EncodeToString(sum[:16])
}
