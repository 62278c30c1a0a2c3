package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/store"
)

var _ store.Transactor = (*Store)(nil)

// ErrNoTransaction is returned by [Tx] for a context that carries no
// transaction: the activity was not declared transactional
// (activity.Policy.Transactional), its worker records in another store, or
// the context is not the one the body was given.
var ErrNoTransaction = errors.New("pgstore: the context carries no transaction: " +
	"declare the activity Transactional and record its claims in a pgstore")

// ErrBodyEndsTransaction is returned by Commit and Rollback of the
// transaction [Tx] hands a body: the dispatcher ends it, recording the
// outcome in it first. A body that must not commit returns an error.
var ErrBodyEndsTransaction = errors.New("pgstore: the dispatcher ends the transaction, not the activity's body; return an error to roll it back")

type txKey struct{}

// Tx returns the transaction a transactional activity's body runs in
// (activity.Policy.Transactional), from the context the body was given.
// Every write the body makes through it commits together with the
// activity's completed record, fenced by its claim's token, or not at all.
// Use it for every write of the effect; a write through any other
// connection is outside the promise.
//
// The body must not commit or roll it back: its Commit and Rollback return
// [ErrBodyEndsTransaction] (savepoints, through Begin, are the body's to
// use). It returns [ErrNoTransaction] when ctx carries none.
func Tx(ctx context.Context) (pgx.Tx, error) {
	if tx, ok := ctx.Value(txKey{}).(bodyTx); ok {
		return tx, nil
	}
	return nil, ErrNoTransaction
}

// bodyTx is the transaction as the body sees it: everything but ending it.
type bodyTx struct{ pgx.Tx }

func (bodyTx) Commit(context.Context) error   { return ErrBodyEndsTransaction }
func (bodyTx) Rollback(context.Context) error { return ErrBodyEndsTransaction }

// CheckTransactional implements [store.Transactor]: db must be nil (the
// body writes through [Tx]) or the *pgxpool.Pool the store was built on. A
// body that writes through another pool, even one on the same database,
// commits apart from the record, and is refused.
func (s *Store) CheckTransactional(db any) error {
	switch db := db.(type) {
	case nil:
		return nil
	case *pgxpool.Pool:
		if db == s.pool {
			return nil
		}
		return fmt.Errorf("pgstore: the activity's writes go through another *pgxpool.Pool than the store's: "+
			"a transaction spans one connection, so they could not commit with the record; "+
			"write through pgstore.Tx(ctx), or build the store on that pool: %w", store.ErrNotTransactional)
	default:
		return fmt.Errorf("pgstore: the activity's writes go through a %T, not the store's *pgxpool.Pool: "+
			"they could not commit with the record; write through pgstore.Tx(ctx): %w", db, store.ErrNotTransactional)
	}
}

// BeginTransaction implements [store.Transactor]: it takes a connection
// from the store's pool and begins a READ COMMITTED transaction on it,
// which the body holds until the dispatcher commits or rolls it back.
func (s *Store) BeginTransaction(ctx context.Context, p store.TransactionParams) (store.Transaction, error) {
	const op = "begin transaction"
	if err := begin(ctx, op, p); err != nil {
		return nil, err
	}
	mark, err := newMark()
	if err != nil {
		return nil, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var (
		tx      pgx.Tx
		guarded bool
	)
	err = retry(ctx, func(ctx context.Context) error {
		var err error
		tx, guarded, err = s.beginGuarded(ctx, mark)
		return err
	})
	if err != nil {
		return nil, s.interpret(ctx, op, err)
	}
	return &transaction{s: s, tx: tx, p: p, mark: mark, guarded: guarded}, nil
}

// transaction is one [store.Transaction] of the store.
type transaction struct {
	s *Store
	p store.TransactionParams
	// tx is the transaction itself.
	tx pgx.Tx
	// mark is the transaction's mark (txguard.go); guarded, whether it
	// holds the commit guard's row.
	mark    string
	guarded bool
	// beforeCommit, when set (by tests), is called between the fenced
	// completion and the COMMIT.
	beforeCommit func()
}

// Context implements [store.Transaction].
func (t *transaction) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, bodyTx{t.tx})
}

// fenceMarker is the text of the error the fenced completion raises, inside
// the transaction, when the claim is no longer pending under its token.
const fenceMarker = "idempotency fence: the claim is no longer held under the token"

// Commit implements [store.Transaction]. The completion is fenced by the
// database: when it changes no row, the statement raises an error, which
// aborts the transaction, so a COMMIT that reaches the server after it
// (sent by nobody, but a connection is not a promise) cannot land the
// body's writes without the record.
func (t *transaction) Commit(ctx context.Context, outcome []byte) error {
	const op = "commit"
	s, p := t.s, t.p
	if err := ctx.Err(); err != nil {
		_ = t.rollback()
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	switch t.tx.Conn().PgConn().TxStatus() {
	case 'T':
	case 'E':
		_ = t.rollback()
		return fmt.Errorf("pgstore: %s %q in tenant %q: the body left its transaction failed (a statement failed and the body did not return the error); nothing landed",
			op, p.Key, p.Tenant)
	default:
		// 'I': the body sent COMMIT or ROLLBACK itself.
		_ = t.rollback()
		return fmt.Errorf("pgstore: %s %q in tenant %q: %w", op, p.Key, p.Tenant, store.ErrTransactionEnded)
	}
	if outcome == nil {
		outcome = []byte{}
	}
	now := s.now(ctx)
	var n int64
	complete := s.sql.completeTx
	if t.guarded && s.sql.completeTxGuarded != "" {
		complete = s.sql.completeTxGuarded
	}
	a := completeTxArgs{
		completeArgs: completeArgs{
			fence:     fence{tenant: p.Tenant, key: p.Key, token: p.Token, now: now},
			expiresAt: now.Add(s.opts.TTL),
			outcome:   outcome,
			notice:    s.notice(p.Tenant, p.Key),
		},
		mark: t.mark,
	}
	var err error
	if s.sql.approve == "" {
		err = t.tx.QueryRow(ctx, complete, a.params().values()...).Scan(&n)
	} else {
		// The portable mode: the approval in a statement of its own,
		// then the fenced completion (see approveSQL).
		approve := s.sql.approve
		if t.guarded {
			approve = s.sql.approveGuarded
		}
		err = t.tx.QueryRow(ctx, approve, approveArgs{mark: t.mark}.params().values()...).Scan(&n)
		if err == nil {
			err = t.tx.QueryRow(ctx, complete, a.completeArgs.params().values()...).Scan(&n)
		}
	}
	if err != nil {
		_ = t.rollback()
		switch {
		case txEnded(err):
			// The body ended the transaction it was given and began
			// another (ROLLBACK AND CHAIN): what it wrote before may have
			// been committed by nothing, or by itself.
			return fmt.Errorf("pgstore: %s %q in tenant %q: the body ended its transaction and began another: %w",
				op, p.Key, p.Tenant, store.ErrTransactionEnded)
		case fenced(err):
			return s.notHolder(ctx, op, p.Tenant, p.Key, p.Token)
		}
		return s.interpretCommit(ctx, op, err)
	}
	if t.beforeCommit != nil {
		t.beforeCommit()
	}
	if err := t.tx.Commit(ctx); err != nil {
		return s.interpretCommit(ctx, op, err)
	}
	return nil
}

// Rollback implements [store.Transaction].
func (t *transaction) Rollback(ctx context.Context) error {
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		// The connection is closed by pgx: the server rolls back when it
		// notices.
		return store.Unavailable("pgstore: rollback", err)
	}
	return nil
}

// rollback ends the transaction after a failed step, bounded on its own.
func (t *transaction) rollback() error {
	ctx, cancel := context.WithTimeout(context.Background(), backoff.CleanupTimeout)
	defer cancel()
	return t.Rollback(ctx)
}

// fenced reports whether err is the completion's fence refusing.
func fenced(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.Contains(pgErr.Message, fenceMarker)
}

// interpretCommit translates an error of the commit's statements. A server
// error means the transaction did not commit (a serialization failure or a
// deadlock matches ErrTransactionConflict); no answer at all means the
// commit's fate is unknown to the caller, who reads the record (see
// store.Transaction.Commit).
func (s *Store) interpretCommit(ctx context.Context, op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && ctx.Err() == nil {
		return fmt.Errorf("pgstore: %s on %s: the transaction did not commit: %w", op, s.tableName, conflict(err))
	}
	return s.interpret(ctx, op, err)
}
