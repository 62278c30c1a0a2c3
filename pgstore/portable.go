package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// What the store does without some of PostgreSQL's own features (see
// Capabilities): EnsureSchema without advisory locks, and the typed error
// of a transaction a serialization failure refused. The claim that
// replaces a standing record without them (claimReplace) is one of the
// claim's paths, in claim.go.

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

// ensureSchemaUnlocked is EnsureSchema without advisory locks. Every
// object is created with IF NOT EXISTS after a check that it is missing;
// two replicas may still both find it missing and race on the catalogs,
// and the loser's transaction fails with a unique violation or a
// duplicate object: it is run again as a whole, and then finds the
// object. The commit guard follows in a transaction of its own; an engine
// that refuses it (no triggers or PL/pgSQL) leaves transactional bodies
// unguarded, as on a schema made before the guard existed.
func (m schemaMaker) ensureSchemaUnlocked(ctx context.Context) error {
	const op = "ensure schema"
	err := retrySchemaRace(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error { return m.schemaDDL(ctx, tx, false) })
	})
	if err != nil {
		return m.interpretSchema(ctx, op, err)
	}
	err = retrySchemaRace(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error { return m.guardDDL(ctx, tx) })
	})
	if err != nil && !guardRefused(err) {
		return m.interpret(ctx, op, err)
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
func retrySchemaRace(ctx context.Context, fn func(ctx context.Context) error) error {
	return retryWhile(ctx, func(err error) bool { return retryable(err) || schemaRace(err) }, fn)
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
