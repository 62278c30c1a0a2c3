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
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/internal/coalesce"
	"github.com/tesserix/idempotency/store"
)

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
		s.claims = coalesce.New(s.busy, batchMaxCalls, s.claimBatch)
		s.completes = coalesce.New(s.busy, batchMaxCalls, s.completeBatch)
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

// schemaLockKey is the pg_advisory_xact_lock key EnsureSchema serializes on,
// so that concurrent replicas creating the same objects do not collide on
// the catalogs' unique indexes (IF NOT EXISTS alone does not prevent that).
const schemaLockKey int64 = 0x6964656d706f7467 // "idempotg"

// EnsureSchema creates the store's schema, table and expiry index when they
// are missing, adds the columns a table made by an earlier version lacks,
// and leaves them alone otherwise. It is the deployment's to
// call; it is idempotent and safe to run from several replicas at once: the
// work is serialized by a transaction-scoped advisory lock (without
// [Capabilities.AdvisoryLocks], a replica that loses a race on the
// catalogs runs its transaction again instead). Objects that
// already exist are detected first, so a role without CREATE privilege can
// run it against a prepared database.
//
// On Citus (the citus extension installed in the database) it distributes
// the table it makes by tenant ([DistributionColumn]), in the same
// transaction, and leaves a table already distributed so alone. A table it
// finds undistributed and holding records, or distributed otherwise, it
// refuses with an error matching [ErrNotDistributed] that names the
// statement to run.
func (s *Store) EnsureSchema(ctx context.Context) error {
	const op = "ensure schema"
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if !s.caps.AdvisoryLocks {
		return s.ensureSchemaUnlocked(ctx)
	}
	err := s.retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", schemaLockKey); err != nil {
				return err
			}
			return s.schemaDDL(ctx, tx, true)
		})
	})
	if err != nil {
		return s.interpretSchema(ctx, op, err)
	}
	return nil
}

// interpretSchema is interpret for EnsureSchema, which may refuse a table
// it will not distribute on Citus (ErrNotDistributed): that is said as it
// is, not as the server unavailable.
func (s *Store) interpretSchema(ctx context.Context, op string, err error) error {
	if errors.Is(err, ErrNotDistributed) && ctx.Err() == nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return s.interpret(ctx, op, err)
}

// schemaDDL creates in tx what EnsureSchema creates that is missing: the
// schema, the table and its indexes, with guard the commit guard, and the
// columns a table made by an earlier version lacks.
func (s *Store) schemaDDL(ctx context.Context, tx pgx.Tx, guard bool) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s.opts.Schema).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s.schema); err != nil {
			return err
		}
	}
	for _, obj := range []struct{ name, ddl string }{
		{s.tableName, s.sql.createTable},
		{pgx.Identifier{s.opts.Schema, indexName(s.opts.Table)}.Sanitize(), s.sql.createIndex},
		{pgx.Identifier{s.opts.Schema, listIndexName(s.opts.Table)}.Sanitize(), s.sql.createListIndex},
	} {
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", obj.name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, obj.ddl); err != nil {
				return err
			}
		}
	}
	if guard {
		if err := s.guardDDL(ctx, tx); err != nil {
			return err
		}
	}
	if err := s.distribute(ctx, tx); err != nil {
		return err
	}
	// A table made by an earlier version lacks the newer columns.
	for _, c := range addedColumns {
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`, s.tableName, c.name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, fmt.Sprintf(s.sql.addColumn, c.name, c.def)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Claim implements [store.Store.Claim] in one round trip in the common
// cases: a fresh key is inserted, or the row that stands is read (see
// claimFast). A standing row that must be replaced (expired, or pending
// under the superseded token) is taken by the full claim statement, which
// judges and replaces it in one server-side statement (see sql.go).
//
// Under READ COMMITTED, the full statement's read of the existing row uses
// the snapshot the statement started with, while ON CONFLICT decides
// against the latest committed row. A row committed by a concurrent claim
// after that snapshot therefore blocks the insert yet is invisible to the
// read, and the statement returns nothing; likewise the read may show an
// older version of the row (one that had expired, or was pending under
// the superseded token) that the conflict arm has just judged differently.
// The fast claim can find no row when one was deleted between its two
// statements. All are detected and the claim is run again at once, with a
// new snapshot, a bounded number of times. No decision is ever made from a
// stale read.
//
// When the caller's context ends, or the connection breaks, while the
// statement is in flight, the claim may have committed without the caller
// learning its token; Claim then undoes the claim it may have made (by
// that token, which only it knows) before returning the error, and the
// undo removes only what that claim created (see undoClaim).
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	const op = "claim"
	if err := begin(ctx, op, p); err != nil {
		return store.Result{}, err
	}
	if err := s.requireSynchronous(ctx); err != nil {
		return store.Result{}, err
	}
	if s.claims == nil || p.Supersede != 0 {
		return s.claim(ctx, p)
	}
	a, err := s.claims.Do(ctx, p, func(ctx context.Context, p store.ClaimParams) (claimAnswer, error) {
		res, err := s.claim(ctx, p)
		return claimAnswer{res: res}, err
	})
	switch {
	case err != nil && err == ctx.Err():
		return store.Result{}, s.interpret(ctx, op, err) // it gave up waiting for a batch
	case err != nil || !a.alone:
		return a.res, err
	}
	return s.claim(ctx, p)
}

// claim is Claim on its own: its own statements, not batched.
func (s *Store) claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	const op = "claim"
	token := store.NewToken()
	for token == p.Supersede {
		token = store.NewToken()
	}
	// The fast claim first: it inserts a fresh key or reads the one
	// standing. Only a standing row that must be replaced (expired, or
	// pending under the superseded token) takes the full statement.
	fast := true
	for attempt := 1; ; attempt++ {
		if attempt > 1 && s.onRetry != nil {
			s.onRetry(attempt)
		}
		// PostgreSQL keeps microseconds; the fast claim builds the record
		// it inserted from these values, so they are what a read returns.
		now := s.now(ctx).Truncate(time.Microsecond)
		rec, acquired, err := s.claimOnce(ctx, p, token, now, fast)
		if fast && err == nil && !acquired && stale(rec, now, p.Supersede) {
			// A row to replace: the full statement judges and takes it.
			fast = false
			attempt--
			continue
		}
		switch {
		case err == nil && acquired:
			return store.Result{Status: store.StatusAcquired, Record: rec}, nil
		case err == nil && !stale(rec, now, p.Supersede):
			return store.ResultOf(rec, now), nil
		case err == nil, errors.Is(err, pgx.ErrNoRows):
			// A stale snapshot, or a row deleted under the fast claim:
			// the change has committed by now, so a new statement, with a
			// new snapshot, sees it. Run it again at once: nothing is
			// waited for that a pause would let finish.
			if attempt == maxAttempts {
				return store.Result{}, keptChanging(p)
			}
			continue
		case !retryable(err):
			if uncertain(ctx, err) {
				// Only the statement that replaces a standing row can
				// have taken a key over; the fast claim inserts into a
				// free key or changes nothing.
				s.undoClaim(ctx, p.Tenant, p.Key, token, !fast && p.Supersede != 0)
			}
			return store.Result{}, s.interpret(ctx, op, err)
		}
		// A transient conflict: run it again after a pause.
		if attempt == maxAttempts {
			return store.Result{}, keptChanging(p)
		}
		if err := pause(ctx, attempt); err != nil {
			return store.Result{}, fmt.Errorf("pgstore: %s: %w", op, err)
		}
	}
}

// claimOnce makes one attempt at the claim: the fast claim, or the full
// statement that judges and replaces a standing row.
func (s *Store) claimOnce(ctx context.Context, p store.ClaimParams, token int64, now time.Time, fast bool) (store.Record, bool, error) {
	if fast {
		return s.claimFast(ctx, p, token, now)
	}
	if s.onReplace != nil {
		s.onReplace()
	}
	if s.sql.claim == "" {
		return s.claimReplace(ctx, p, token, now)
	}
	var (
		rec      store.Record
		acquired bool
		notified int64
	)
	row := s.pool.QueryRow(ctx, s.sql.claim, claimArgs{
		newClaim:  s.newClaim(p, token, now),
		supersede: p.Supersede,
		notice:    s.notice(p.Tenant, p.Key),
	}.params().values()...)
	err := scanRecord(row, &rec, &acquired, &notified)
	return rec, acquired, err
}

// keptChanging is the error of a claim whose key changed under every one
// of its attempts.
func keptChanging(p store.ClaimParams) error {
	return store.Unavailable("pgstore: claim",
		fmt.Errorf("key %q in tenant %q kept changing under %d attempts", p.Key, p.Tenant, maxAttempts))
}

// claimFast is the claim of the common cases, in one round trip: a batch
// of two statements that PostgreSQL runs as one implicit transaction. The
// first inserts the key unless a row stands (ON CONFLICT DO NOTHING); the
// second reads the row that stands, unless it is the one just inserted.
// Under READ COMMITTED each statement of a transaction takes its own
// snapshot, so when the insert had to wait for a concurrent claim of the
// same key to commit, the read, which starts after that wait, sees the row
// that claim committed. (Read in the same statement, through a CTE, it
// would not: the snapshot predates the wait.) A key that stands is read,
// not locked, so a duplicate's claim writes nothing and commits without a
// WAL flush. A claim that inserts learns nothing from the read: the record
// is the one it wrote, built here from the values it sent.
//
// It reports acquired when the insert took the key; otherwise rec is the
// row that stands, and pgx.ErrNoRows says none stands any more (it was
// deleted between the two statements), for the caller to run it again.
func (s *Store) claimFast(ctx context.Context, p store.ClaimParams, token int64, now time.Time) (rec store.Record, acquired bool, err error) {
	c := s.newClaim(p, token, now)
	b := &pgx.Batch{}
	b.Queue(s.sql.claimInsert, claimInsertArgs{c}.params().values()...)
	b.Queue(s.sql.claimRead, claimReadArgs{tenant: p.Tenant, key: p.Key, ownToken: token}.params().values()...)
	br := s.pool.SendBatch(ctx, b)
	tag, err := br.Exec()
	if err == nil {
		acquired = tag.RowsAffected() == 1
		if !acquired {
			err = scanRecord(br.QueryRow(), &rec)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || !acquired {
		return rec, false, err
	}
	return store.Record{
		Tenant: p.Tenant, Key: p.Key, State: store.StatePending, Holder: p.Holder, Token: token,
		LeaseUntil: c.leaseUntil, ExpiresAt: c.expiresAt, CreatedAt: now, UpdatedAt: now, Origin: p.Origin,
		Check: p.Check, Retention: keptRetention(p.Retention),
	}, true, nil
}

// newClaim is the record a claim under token, made at now, writes.
func (s *Store) newClaim(p store.ClaimParams, token int64, now time.Time) newClaim {
	lease, expires := s.claimTimes(now, p.Lease, p.Retention)
	check, retention := kept(p.Check, p.Retention)
	return newClaim{
		tenant: p.Tenant, key: p.Key, holder: p.Holder, token: token,
		leaseUntil: lease, expiresAt: expires, now: now,
		origin: p.Origin, check: check, retention: retention,
	}
}

// notice is where a change to tenant's key is announced: nowhere, without
// Capabilities.Notify.
func (s *Store) notice(tenant, key string) notice {
	if !s.caps.Notify {
		return notice{silent: true}
	}
	return notice{channel: s.opts.NotifyChannel, payload: payloadFor(tenant, key)}
}

// kept returns the check digest and the retention (microseconds) a record
// keeps as bind parameters: NULL for none.
func kept(check string, retention time.Duration) (*string, *int64) {
	var c *string
	var r *int64
	if check != "" {
		c = &check
	}
	if us := retention.Microseconds(); us > 0 {
		r = &us
	}
	return c, r
}

// keptRetention is retention as the table keeps it: to the microsecond.
func keptRetention(retention time.Duration) time.Duration {
	return retention.Truncate(time.Microsecond)
}

// claimTimes returns the lease deadline and the expiry of a claim made at
// now: the retention window (the claim's own, else the TTL), never ending
// before the lease (a lease longer than the window), so the key is not
// free while its holder may be running.
func (s *Store) claimTimes(now time.Time, lease, retention time.Duration) (leaseUntil, expires time.Time) {
	leaseUntil, expires = now.Add(lease), now.Add(store.RetentionOr(keptRetention(retention), s.opts.TTL))
	if expires.Before(leaseUntil) {
		expires = leaseUntil
	}
	return leaseUntil, expires
}

// stale reports whether a row the claim statement read but did not take
// cannot be the row its conflict arm judged: one the arm would have taken.
func stale(rec store.Record, now time.Time, supersede int64) bool {
	if !now.Before(rec.ExpiresAt) {
		return true
	}
	return supersede != 0 && rec.State == store.StatePending && rec.Token == supersede
}

// uncertain reports whether a failed statement may have committed without
// its answer reaching the caller: the caller's context ended while it was
// in flight, or the connection failed after it was sent. A server error
// means the implicit transaction was rolled back; an error pgx marks safe
// to retry means nothing was sent.
func uncertain(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && !pgconn.SafeToRetry(err)
}

// undoClaim undoes the claim made under token, if it was made, after its
// answer was lost. The token is the one this call generated, so the undo
// can only touch the claim this call made, and it removes only what that
// claim created (the rule of store.Store.Claim):
//
//   - a claim of a free key (or of an expired row) is deleted;
//   - a takeover, which may have replaced a lost holder's pending record,
//     is left standing, pending, with its lease ended now by the store's
//     clock, so the next claimer finds the key held by a holder presumed
//     gone, as it would have found the record it replaced. Deleting it
//     would free a key whose effect may have landed.
//
// takeover is set when the statement in flight was the one that replaces
// rows and the claim superseded a token. It is conservative: that
// statement may instead have replaced an expired row (the key was free),
// and then the next EFFECTFUL claimer ends indeterminate where the key was
// free — a person asked needlessly, never an effect run twice. The store
// package's documentation says why the lease is ended rather than the
// superseded record restored.
//
// It is best effort: when it fails too, the claim stays as it landed until
// its lease runs out, which frees nothing either.
func (s *Store) undoClaim(ctx context.Context, tenant, key string, token int64, takeover bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backoff.CleanupTimeout)
	defer cancel()
	var n int64
	if takeover {
		a := settleArgs{fence: fence{tenant: tenant, key: key, token: token, now: s.now(ctx)}, notice: s.notice(tenant, key)}
		_ = s.pool.QueryRow(ctx, s.sql.endLease, a.params().values()...).Scan(&n)
		return
	}
	a := cancelClaimArgs{tenant: tenant, key: key, token: token, notice: s.notice(tenant, key)}
	_ = s.pool.QueryRow(ctx, s.sql.cancelClaim, a.params().values()...).Scan(&n)
}

// Renew implements [store.Store.Renew].
func (s *Store) Renew(ctx context.Context, p store.RenewParams) (time.Time, error) {
	const op = "renew"
	if err := begin(ctx, op, p); err != nil {
		return time.Time{}, err
	}
	var until time.Time
	err := s.retry(ctx, func(ctx context.Context) error {
		now := s.now(ctx)
		a := renewArgs{
			fence:      fence{tenant: p.Tenant, key: p.Key, token: p.Token, now: now},
			leaseUntil: now.Add(p.Lease),
			expiresAt:  now.Add(s.opts.TTL),
		}
		return s.pool.QueryRow(ctx, s.sql.renew, a.params().values()...).Scan(&until)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, s.notHolder(ctx, op, p.Tenant, p.Key, p.Token)
	}
	if err != nil {
		return time.Time{}, s.interpret(ctx, op, err)
	}
	return until, nil
}

// Complete implements [store.Store.Complete].
func (s *Store) Complete(ctx context.Context, p store.CompleteParams) error {
	const op = "complete"
	if err := begin(ctx, op, p); err != nil {
		return err
	}
	if s.completes != nil {
		done, err := s.completes.Do(ctx, p, func(ctx context.Context, p store.CompleteParams) (bool, error) {
			return true, s.complete(ctx, p)
		})
		switch {
		case err != nil && err == ctx.Err():
			return s.interpret(ctx, op, err) // it gave up waiting for a batch
		case err != nil || done:
			return err
		}
	}
	return s.complete(ctx, p)
}

// complete is Complete on its own: its own statement, not batched.
func (s *Store) complete(ctx context.Context, p store.CompleteParams) error {
	const op = "complete"
	outcome := p.Outcome
	if outcome == nil {
		outcome = []byte{} // nil and empty are the same: store '' rather than NULL
	}
	return s.fenced(ctx, op, p.Tenant, p.Key, p.Token, func(f fence) (string, paramList) {
		return s.sql.complete, completeArgs{
			fence:     f,
			expiresAt: f.now.Add(s.opts.TTL),
			outcome:   outcome,
			notice:    s.notice(p.Tenant, p.Key),
		}.params()
	})
}

// Release implements [store.Store.Release].
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	const op = "release"
	if err := begin(ctx, op, p); err != nil {
		return err
	}
	return s.fenced(ctx, op, p.Tenant, p.Key, p.Token, func(f fence) (string, paramList) {
		return s.sql.release, settleArgs{fence: f, notice: s.notice(p.Tenant, p.Key)}.params()
	})
}

// MarkIndeterminate implements [store.Store.MarkIndeterminate].
func (s *Store) MarkIndeterminate(ctx context.Context, p store.MarkIndeterminateParams) error {
	const op = "mark indeterminate"
	if err := begin(ctx, op, p); err != nil {
		return err
	}
	return s.fenced(ctx, op, p.Tenant, p.Key, p.Token, func(f fence) (string, paramList) {
		return s.sql.markIndeterminate, markArgs{
			fence:     f,
			expiresAt: store.NeverExpires, // an indeterminate record keeps until a person decides
			reason:    p.Reason,
			notice:    s.notice(p.Tenant, p.Key),
		}.params()
	})
}

// fenced runs a statement that changes a record only while token holds its
// pending claim, and turns "no row changed" into ErrNotHolder. stmt
// returns the statement and its parameters for the fence, at each
// attempt's now.
func (s *Store) fenced(ctx context.Context, op, tenant, key string, token int64, stmt func(fence) (string, paramList)) error {
	var n int64
	err := s.retry(ctx, func(ctx context.Context) error {
		sql, params := stmt(fence{tenant: tenant, key: key, token: token, now: s.now(ctx)})
		if s.sql.counted {
			tag, err := s.pool.Exec(ctx, sql, params.values()...)
			n = tag.RowsAffected()
			return err
		}
		return s.pool.QueryRow(ctx, sql, params.values()...).Scan(&n)
	})
	if err != nil {
		return s.interpret(ctx, op, err)
	}
	if n == 0 {
		return s.notHolder(ctx, op, tenant, key, token)
	}
	return nil
}

// notHolder builds the ErrNotHolder error for a fenced call that changed
// nothing. It reads the record only to tell the person what stands there
// instead; the read changes nothing, so its racing a concurrent change is
// harmless.
func (s *Store) notHolder(ctx context.Context, op, tenant, key string, token int64) error {
	var what string
	rec, err := s.lookup(ctx, tenant, key)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		what = "the key has no live record"
	case err != nil:
		what = "the record could not be read"
	case rec.State != store.StatePending:
		what = "the record is " + rec.State.String()
	default:
		what = fmt.Sprintf("the claim is held under token %d by %q", rec.Token, rec.Holder)
	}
	return fmt.Errorf("pgstore: %s %q in tenant %q with token %d: %w (%s)", op, key, tenant, token, store.ErrNotHolder, what)
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
	err := s.retry(ctx, func(ctx context.Context) error {
		a := keyAt{tenant: tenant, key: key, now: s.now(ctx)}
		return scanRecord(s.pool.QueryRow(ctx, s.sql.watch, a.params().values()...), &rec)
	})
	return rec, err
}

// lookup reads the key's live record, returning pgx.ErrNoRows when there is
// none and untranslated errors otherwise.
func (s *Store) lookup(ctx context.Context, tenant, key string) (store.Record, error) {
	var rec store.Record
	err := s.retry(ctx, func(ctx context.Context) error {
		a := keyAt{tenant: tenant, key: key, now: s.now(ctx)}
		return scanRecord(s.pool.QueryRow(ctx, s.sql.lookup, a.params().values()...), &rec)
	})
	return rec, err
}

// Resolve implements [store.Store.Resolve].
func (s *Store) Resolve(ctx context.Context, p store.ResolveParams) error {
	const op = "resolve"
	if err := begin(ctx, op, p); err != nil {
		return err
	}
	announce := s.notice(p.Tenant, p.Key)
	trail := resolution{action: int16(p.Decision), by: p.By, reason: p.Reason, reference: p.Reference}
	outcome := p.Outcome
	if outcome == nil {
		outcome = []byte{}
	}
	var (
		n    int64
		when time.Time // the store's time the statement judged leases by
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		now := s.now(ctx)
		when = now
		if p.Decision == store.ActionComplete {
			a := resolveCompleteArgs{
				tenant: p.Tenant, key: p.Key, now: now, expiresAt: now.Add(s.opts.TTL), outcome: outcome,
				notice: announce, token: p.Token, resolution: trail, stale: p.Stale,
			}
			return s.pool.QueryRow(ctx, s.sql.resolveComplete, a.params().values()...).Scan(&n)
		}
		a := resolveFreeArgs{tenant: p.Tenant, key: p.Key, now: now, notice: announce, token: p.Token, stale: p.Stale}
		return s.pool.QueryRow(ctx, s.sql.resolveFree, a.params().values()...).Scan(&n)
	})
	if err != nil {
		return s.interpret(ctx, op, err)
	}
	if n > 0 {
		return nil
	}
	// Nothing changed: say why. The read only picks the error.
	rec, err := s.lookup(ctx, p.Tenant, p.Key)
	if errors.Is(err, pgx.ErrNoRows) && p.RecordIfGone {
		err = s.retry(ctx, func(ctx context.Context) error {
			now := s.now(ctx)
			check, retention := kept(p.Check, p.Retention)
			a := resolveGoneArgs{
				tenant: p.Tenant, key: p.Key, holder: store.ResolveHolder, token: store.NewToken(),
				now: now, expiresAt: now.Add(store.RetentionOr(keptRetention(p.Retention), s.opts.TTL)),
				outcome: outcome, resolution: trail, notice: announce, check: check, retention: retention,
			}
			return s.pool.QueryRow(ctx, s.sql.resolveGone, a.params().values()...).Scan(&n)
		})
		if err != nil {
			return s.interpret(ctx, op, err)
		}
		if n > 0 {
			return nil
		}
		// Claimed again since the read: say what stands there now.
		rec, err = s.lookup(ctx, p.Tenant, p.Key)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstore: %s %q in tenant %q: %w", op, p.Key, p.Tenant, store.ErrNotFound)
	case err != nil:
		return s.interpret(ctx, op, err)
	case rec.State == store.StatePending && p.Stale && rec.Token != p.Token:
		return fmt.Errorf("pgstore: %s %q in tenant %q decided on token %d, but the claim pending stands under %d: %w",
			op, p.Key, p.Tenant, p.Token, rec.Token, store.ErrNotHolder)
	case rec.State == store.StatePending && p.Stale && when.Before(rec.LeaseUntil):
		// A lease only grows (a holder renewing), so what the read shows
		// is what the statement refused.
		return fmt.Errorf("pgstore: %s %q in tenant %q: its holder %q holds a lease until %v: %w",
			op, p.Key, p.Tenant, rec.Holder, rec.LeaseUntil, store.ErrLeaseLive)
	case rec.State == store.StatePending && p.Stale:
		return fmt.Errorf("pgstore: %s %q in tenant %q changed while being resolved: %w", op, p.Key, p.Tenant, store.ErrNotIndeterminate)
	case rec.State == store.StateIndeterminate && p.Token != 0 && rec.Token != p.Token:
		return fmt.Errorf("pgstore: %s %q in tenant %q decided on token %d, but the indeterminate record stands under %d: %w",
			op, p.Key, p.Tenant, p.Token, rec.Token, store.ErrNotHolder)
	case rec.State == store.StateIndeterminate:
		// It became indeterminate between the two statements; the
		// caller may try again.
		return fmt.Errorf("pgstore: %s %q in tenant %q changed while being resolved: %w", op, p.Key, p.Tenant, store.ErrNotIndeterminate)
	default:
		return fmt.Errorf("pgstore: %s %q in tenant %q, which is %s: %w", op, p.Key, p.Tenant, rec.State, store.ErrNotIndeterminate)
	}
}

// Forget implements [store.Store.Forget]. It counts expired records it
// erases too, and wakes every waiter on the tenant's erased keys.
func (s *Store) Forget(ctx context.Context, p store.ForgetParams) (int, error) {
	const op = "forget"
	if err := begin(ctx, op, p); err != nil {
		return 0, err
	}
	var n int64
	err := s.retry(ctx, func(ctx context.Context) error {
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
	err := s.retry(ctx, func(ctx context.Context) error {
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
func (s *Store) retry(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.retryWhile(ctx, retryable, fn)
}

// retryWhile is retry, running fn again while again says its error is
// worth it.
func (s *Store) retryWhile(ctx context.Context, again func(error) bool, fn func(ctx context.Context) error) error {
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
