package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tesserix/idempotency/store"
)

// ErrNoSchema is returned, wrapped with the table's name and the server's
// error, when the store's schema or table does not exist: the deployment
// has not called [Store.EnsureSchema]. The library never creates tables on
// its own.
var ErrNoSchema = errors.New("idempotency table does not exist; call (*pgstore.Store).EnsureSchema once at deployment")

// ErrSchemaMismatch is returned, wrapped with the table's name and the
// server's error, when the table exists but does not have the shape
// [Store.EnsureSchema] creates: a column or the primary key the statements
// rely on is missing, or a constraint of the table refuses a record.
var ErrSchemaMismatch = errors.New("idempotency table does not have the shape EnsureSchema creates")

// PostgreSQL SQLSTATE codes the store acts on.
const (
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeUndefinedTable       = "42P01"
	codeInvalidSchemaName    = "3F000"
	codeUndefinedColumn      = "42703"
	codeInvalidColumnRef     = "42P10" // ON CONFLICT without the primary key
	classIntegrity           = "23"    // integrity constraint violations
	codeQueryCanceled        = "57014" // statement_timeout, or a cancel request
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	codeReadOnlyTransaction  = "25006" // a hot standby after failover
)

// retryable reports whether err is a transient conflict the same statement
// should simply be run again for.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == codeSerializationFailure || pgErr.Code == codeDeadlockDetected
}

// interpret translates an error from pgx into the contract's errors, at the
// store's edge (as river's interpretError does):
//
//   - the caller's own context ending returns the context's error;
//   - a server error saying the table or schema is missing matches
//     ErrNoSchema; one saying the table has another shape (a missing
//     column or primary key, a constraint refusing a record) matches
//     ErrSchemaMismatch;
//   - a server error saying the server is going away, refusing
//     connections, out of resources or timed out matches
//     store.ErrUnavailable;
//   - any other server error is returned with the operation's context;
//   - everything else — no server answer at all: refused or broken
//     connections, I/O timeouts, TLS failures, a closed pool — matches
//     store.ErrUnavailable. Classing an unrecognised client-side error as
//     unavailable is the safe direction: a store that cannot answer never
//     reads as permission to run an effect.
func (s *Store) interpret(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("pgstore: %s: %w", op, ctxErr)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == codeUndefinedTable || pgErr.Code == codeInvalidSchemaName:
			return fmt.Errorf("pgstore: %s on %s: %w: %w", op, s.tableName, ErrNoSchema, err)
		case pgErr.Code == codeUndefinedColumn || pgErr.Code == codeInvalidColumnRef ||
			strings.HasPrefix(pgErr.Code, classIntegrity):
			return fmt.Errorf("pgstore: %s on %s: %w: %w", op, s.tableName, ErrSchemaMismatch, err)
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"), // insufficient resources
			pgErr.Code == codeAdminShutdown, pgErr.Code == codeCrashShutdown,
			pgErr.Code == codeCannotConnectNow, pgErr.Code == codeQueryCanceled,
			pgErr.Code == codeReadOnlyTransaction:
			s.forgetReplicationCheck() // a failover looks like this
			return store.Unavailable("pgstore: "+op, err)
		default:
			return fmt.Errorf("pgstore: %s on %s: %w", op, s.tableName, err)
		}
	}
	s.forgetReplicationCheck()
	return store.Unavailable("pgstore: "+op, err)
}
