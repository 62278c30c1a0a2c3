package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The commit guard. A transactional body writes through the transaction
// the dispatcher hands it, and must not end it: its Commit and Rollback
// methods refuse (ErrBodyEndsTransaction), but SQL can end it too — COMMIT,
// COMMIT AND CHAIN, ROLLBACK AND CHAIN sent through Exec. A body's own
// COMMIT would land its writes without the record; if its claim was taken
// over meanwhile, the taker, finding a transactional holder gone, runs the
// body again: a second effect. So every transactional transaction begins
// by inserting a row into the guard table, whose constraint trigger,
// deferred to COMMIT, refuses any COMMIT that the dispatcher's fenced
// completion did not approve (it sets idempotency.commit to the
// transaction's mark, and deletes the row, in the statement that completes
// the record). A body's own COMMIT therefore fails, and its writes roll
// back. The transaction's mark, set as a transaction-local setting at
// BEGIN, tells the completion whether it still runs in the transaction that
// began: a chained one (after ROLLBACK AND CHAIN) has lost it, and the
// completion refuses (ErrTransactionEnded). EnsureSchema creates the table
// and trigger; a store whose schema predates them begins transactions
// without the guard, as before, and says so once.

// guardSetting and markSetting are the transaction-local settings of the
// guard.
const (
	markSetting   = "idempotency.tx"
	commitSetting = "idempotency.commit"
)

// guardMarker is the text of the error the guard raises.
const guardMarker = "idempotency guard: only the dispatcher commits the transaction of a transactional activity"

// txEndedMarker is the text of the error the completion raises in a
// transaction that is not the one that began.
const txEndedMarker = "idempotency transaction ended: the completion runs in another transaction than the one the body began in"

// guardStatements are the guard's DDL and its BEGIN.
type guardStatements struct {
	table, function, createTable, createFunction, createTrigger string
}

func buildGuard(schema, table string) guardStatements {
	name := guardName(table)
	t := pgx.Identifier{schema, name}.Sanitize()
	f := pgx.Identifier{schema, name + "_check"}.Sanitize()
	return guardStatements{
		table:       t,
		function:    f,
		createTable: "CREATE UNLOGGED TABLE IF NOT EXISTS " + t + " (mark text NOT NULL)",
		createFunction: "CREATE OR REPLACE FUNCTION " + f + "() RETURNS trigger LANGUAGE plpgsql AS $guard$\n" +
			"BEGIN\n" +
			"\tIF current_setting('" + commitSetting + "', true) IS DISTINCT FROM NEW.mark THEN\n" +
			"\t\tRAISE EXCEPTION '" + guardMarker + "';\n" +
			"\tEND IF;\n" +
			"\tRETURN NULL;\n" +
			"END\n$guard$",
		createTrigger: "CREATE CONSTRAINT TRIGGER " + pgx.Identifier{name}.Sanitize() + " AFTER INSERT ON " + t +
			" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + f + "()",
	}
}

// beginQuery is the BEGIN of a transactional body's transaction, marked
// with mark and, with guarded, holding the guard's row.
func (g guardStatements) beginQuery(mark string, guarded bool) string {
	q := "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT set_config('" + markSetting + "', '" + mark + "', true)"
	if guarded {
		q += "; INSERT INTO " + g.table + " (mark) VALUES ('" + mark + "')"
	}
	return q
}

// newMark returns a transaction's mark: random hexadecimal, so it can
// stand in the BEGIN's text as it is.
func newMark() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// guardState remembers whether the guard's table exists, asked again
// every guardRecheck while it does not.
type guardState struct {
	missingSince atomic.Int64 // UnixNano; zero while the guard is believed present
}

const guardRecheck = time.Minute

// guarded reports whether transactions should insert the guard's row.
func (g *guardState) guarded() bool {
	since := g.missingSince.Load()
	return since == 0 || time.Since(time.Unix(0, since)) > guardRecheck
}

// isMissingGuard reports whether err says the guard's table does not exist.
func isMissingGuard(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01" // undefined_table
}

// txEnded reports whether err is the completion refusing to run in a
// transaction other than the one that began.
func txEnded(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.Contains(pgErr.Message, txEndedMarker)
}

// beginGuarded begins a transactional body's transaction with mark, with
// the guard when its table exists, and reports whether it has it.
func (s *Store) beginGuarded(ctx context.Context, mark string) (pgx.Tx, bool, error) {
	if s.guard.guarded() {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.guardSQL.beginQuery(mark, true)})
		if err == nil {
			s.guard.missingSince.Store(0)
			return tx, true, nil
		}
		if !isMissingGuard(err) {
			return nil, false, err
		}
		// A schema that predates the guard: run without it, as before
		// (a body's own COMMIT is then caught afterwards, not refused),
		// until EnsureSchema creates it.
		s.guard.missingSince.Store(time.Now().UnixNano())
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: s.guardSQL.beginQuery(mark, false)})
	return tx, false, err
}

// guardDDL creates the guard's objects in tx, when missing.
func (m schemaMaker) guardDDL(ctx context.Context, tx pgx.Tx) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", m.guardSQL.table).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	for _, ddl := range []string{m.guardSQL.createTable, m.guardSQL.createFunction, m.guardSQL.createTrigger} {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("creating the commit guard: %w", err)
		}
	}
	return nil
}
