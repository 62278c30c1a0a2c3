package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

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
	m := schemaMaker{s}
	if !s.caps.AdvisoryLocks {
		return m.ensureSchemaUnlocked(ctx)
	}
	err := retry(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", schemaLockKey); err != nil {
				return err
			}
			return m.schemaDDL(ctx, tx, true)
		})
	})
	if err != nil {
		return m.interpretSchema(ctx, op, err)
	}
	return nil
}

// schemaMaker is the store seen from EnsureSchema: what runs at a
// deployment, once, apart from what runs on every call. It embeds the
// Store for the pool, the names and the statements that make the schema.
type schemaMaker struct{ *Store }

// interpretSchema is interpret for EnsureSchema, which may refuse a table
// it will not distribute on Citus (ErrNotDistributed): that is said as it
// is, not as the server unavailable.
func (m schemaMaker) interpretSchema(ctx context.Context, op string, err error) error {
	if errors.Is(err, ErrNotDistributed) && ctx.Err() == nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return m.interpret(ctx, op, err)
}

// schemaDDL creates in tx what EnsureSchema creates that is missing: the
// schema, the table and its indexes, with guard the commit guard, and the
// columns a table made by an earlier version lacks.
func (m schemaMaker) schemaDDL(ctx context.Context, tx pgx.Tx, guard bool) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", m.opts.Schema).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+m.schema); err != nil {
			return err
		}
	}
	for _, obj := range []struct{ name, ddl string }{
		{m.tableName, m.sql.createTable},
		{pgx.Identifier{m.opts.Schema, indexName(m.opts.Table)}.Sanitize(), m.sql.createIndex},
		{pgx.Identifier{m.opts.Schema, listIndexName(m.opts.Table)}.Sanitize(), m.sql.createListIndex},
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
		if err := m.guardDDL(ctx, tx); err != nil {
			return err
		}
	}
	if err := m.distribute(ctx, tx); err != nil {
		return err
	}
	// A table made by an earlier version lacks the newer columns.
	for _, c := range addedColumns {
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`, m.tableName, c.name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, fmt.Sprintf(m.sql.addColumn, c.name, c.def)); err != nil {
				return err
			}
		}
	}
	return nil
}
