package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tesserix/idempotency/store"
)

// What the store does without some of PostgreSQL's own features (see
// Capabilities): the claim that replaces a standing record, EnsureSchema
// without advisory locks, and the typed error of a transaction a
// serialization failure refused.

// ErrTransactionConflict is matched (errors.Is) by the error of
// [store.Transaction.Commit] when the database refused the transaction of
// a transactional body for conflicting with a concurrent one: a
// serialization failure (SQLSTATE 40001; routine on CockroachDB, whose
// transactions are SERIALIZABLE, and on YugabyteDB) or a deadlock
// (40P01), raised by the fenced completion or by the COMMIT itself. The
// server said so, so nothing of the body landed and the claim stands
// pending under its token, as before the body ran: running the body again,
// in a new transaction, is safe, and the dispatcher does so by freeing the
// key and sending the activity to its retry policy.
//
// The store runs every statement of its own (a claim's batch, a
// completion, EnsureSchema's transaction) again as a whole on these
// errors, a bounded number of times. It cannot run a transactional
// body's transaction again: the body is the application's code, run by
// the dispatcher between [Store.BeginTransaction] and the commit, and only
// the dispatcher's retry can run it again. A body whose own statement
// fails with one of these errors should return it: its transaction rolls
// back and the key is freed for the retry.
var ErrTransactionConflict = errors.New("pgstore: the database refused the transaction for conflicting with a concurrent one; nothing landed, and running it again is safe")

// conflictError is an error of the server refusing a transaction for a
// conflict: it reads as the server's error, and matches
// ErrTransactionConflict.
type conflictError struct{ err error }

func (e *conflictError) Error() string        { return e.err.Error() }
func (e *conflictError) Unwrap() error        { return e.err }
func (e *conflictError) Is(target error) bool { return target == ErrTransactionConflict }

// claimReplace is the full claim without xmax: an upsert that takes the
// standing row when it has expired or is pending under the superseded
// token, and returns the record only when it wrote it. The token in what
// it returns tells the claim's outcome: this call's own, it took the key.
// When nothing comes back, a second statement (with a snapshot of its
// own, so it sees what the upsert's conflict found) reads what stands;
// pgx.ErrNoRows from it says nothing does any more, for the caller to run
// the claim again. A replacement is announced (with Notify) by a statement
// of its own, after the upsert committed: a waiter woken re-reads and
// finds the new claim.
func (s *Store) claimReplace(ctx context.Context, p store.ClaimParams, token int64, now time.Time) (store.Record, bool, error) {
	var rec store.Record
	err := scanRecord(s.pool.QueryRow(ctx, s.sql.claimUpsert, claimArgs{
		newClaim:  s.newClaim(p, token, now),
		supersede: p.Supersede,
		notice:    notice{silent: true},
	}.params().values()...), &rec)
	switch {
	case err == nil && rec.Token == token:
		if s.sql.announce != "" {
			// Best effort: a lost announcement leaves the waiters of the
			// replaced record to their polling.
			_, _ = s.pool.Exec(ctx, s.sql.announce, s.notice(p.Tenant, p.Key).params().values()...)
		}
		return rec, true, nil
	case err == nil:
		// Not this call's token: what it returned stands, and is not ours.
		return rec, false, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return rec, false, err
	}
	rec = store.Record{}
	err = scanRecord(s.pool.QueryRow(ctx, s.sql.claimRead,
		claimReadArgs{tenant: p.Tenant, key: p.Key, ownToken: token}.params().values()...), &rec)
	return rec, false, err
}

// ensureSchemaUnlocked is EnsureSchema without advisory locks. Every
// object is created with IF NOT EXISTS after a check that it is missing;
// two replicas may still both find it missing and race on the catalogs,
// and the loser's transaction fails with a unique violation or a
// duplicate object: it is run again as a whole, and then finds the
// object. The commit guard follows in a transaction of its own; an engine
// that refuses it (no triggers or PL/pgSQL) leaves transactional bodies
// unguarded, as on a schema made before the guard existed.
func (s *Store) ensureSchemaUnlocked(ctx context.Context) error {
	const op = "ensure schema"
	err := s.retrySchemaRace(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.schemaDDL(ctx, tx, false) })
	})
	if err != nil {
		return s.interpretSchema(ctx, op, err)
	}
	err = s.retrySchemaRace(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.guardDDL(ctx, tx) })
	})
	if err != nil && !guardRefused(err) {
		return s.interpret(ctx, op, err)
	}
	return nil
}

// SQLSTATE codes of a race on the catalogs between two replicas creating
// the same object, and of an engine refusing what the commit guard needs.
const (
	codeUniqueViolation     = "23505"
	codeDuplicateTable      = "42P07"
	codeDuplicateObject     = "42710"
	codeDuplicateSchema     = "42P06"
	codeDuplicateFunction   = "42723"
	codeFeatureNotSupported = "0A000"
	codeSyntaxError         = "42601"
	codeUndefinedObject     = "42704"
	codeUndefinedFunction   = "42883"
)

// retrySchemaRace is retry that also runs fn again when it lost a race on
// the catalogs.
func (s *Store) retrySchemaRace(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.retryWhile(ctx, func(err error) bool { return retryable(err) || schemaRace(err) }, fn)
}

// schemaRace reports whether err is a DDL statement losing a race on the
// catalogs to a concurrent one creating the same object.
func schemaRace(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case codeUniqueViolation, codeDuplicateTable, codeDuplicateObject, codeDuplicateSchema, codeDuplicateFunction:
		return true
	}
	return false
}

// guardRefused reports whether err is an engine refusing the commit
// guard's DDL for lacking a feature it needs.
func guardRefused(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case codeFeatureNotSupported, codeSyntaxError, codeUndefinedObject, codeUndefinedFunction:
		return true
	}
	return false
}

// conflict wraps err, a server error refusing a transaction, so it
// matches ErrTransactionConflict when it is a serialization failure or a
// deadlock; other errors are returned as they are.
func conflict(err error) error {
	if retryable(err) {
		return &conflictError{err}
	}
	return err
}
