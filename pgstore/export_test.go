package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/store"
)

// Listening reports whether the store's listener has a connection
// LISTENing now.
func (s *Store) Listening() bool {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return s.l.listening
}

// Waiters returns how many Wait calls are registered on the key.
func (s *Store) Waiters(tenant, key string) int {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return len(s.l.waiters[payloadFor(tenant, key)])
}

// Delivered returns how many notifications found a waiter.
func (s *Store) Delivered() int64 {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return s.l.delivered
}

// SetOnBlock sets a function called each time a Wait is about to block. Set
// it before the store is used.
func (s *Store) SetOnBlock(f func(store.WaitParams)) { s.onBlock = f }

// SetOnRetry sets a function called each time a Claim runs its statement
// again. Set it before the store is used.
func (s *Store) SetOnRetry(f func(attempt int)) { s.onRetry = f }

// SetOnReplace sets a function called each time a Claim is about to send
// the statement that replaces a standing row (a takeover, or an expired
// row). Set it before the store is used.
func (s *Store) SetOnReplace(f func()) { s.onReplace = f }

// ClaimInsertSQL, ClaimReadSQL and CompleteSQL return the statements Claim
// (of a fresh key) and Complete run, so the benchmarks' hand-rolled version
// issues exactly the same SQL.
func (s *Store) ClaimInsertSQL() string { return s.sql.claimInsert }
func (s *Store) ClaimReadSQL() string   { return s.sql.claimRead }
func (s *Store) CompleteSQL() string    { return s.sql.complete }

// PayloadFor is payloadFor.
var PayloadFor = payloadFor

// NewWithLocalClock is New with the store's server clock reading local as
// the worker's own clock, so a test can skew it.
func NewWithLocalClock(pool *pgxpool.Pool, opts Options, local store.Clock) (*Store, error) {
	return newStore(pool, opts, local)
}

// ListSQL returns the statement and arguments a listing runs at now.
func (s *Store) ListSQL(p store.ListParams, across bool, now time.Time) (string, []any, error) {
	return s.listQuery(p, across, now)
}

// CountBacklogSQL returns the statement and arguments CountBacklog runs at
// now.
func (s *Store) CountBacklogSQL(now time.Time) (string, []any) {
	return s.sql.countBacklog, []any{now}
}

// ListIndexName is the unquoted name of the listings' partial index.
func (s *Store) ListIndexName() string { return listIndexName(s.opts.Table) }

// TableName is the quoted, schema-qualified table.
func (s *Store) TableName() string { return s.tableName }

// CommitWithHook is txn.Commit with hook called between the fenced
// completion and the COMMIT, for a test to set a fault on the COMMIT alone.
func CommitWithHook(ctx context.Context, txn store.Transaction, outcome []byte, hook func()) error {
	t := txn.(*transaction)
	t.beforeCommit = hook
	return t.Commit(ctx, outcome)
}

// Statements returns the text of every statement the store may send,
// named, for tests that read what a mode sends.
func (s *Store) Statements() map[string]string {
	st := s.sql
	return map[string]string{
		"createTable": st.createTable, "createIndex": st.createIndex, "addColumn": st.addColumn,
		"createListIndex": st.createListIndex, "watch": st.watch, "claim": st.claim, "claimInsert": st.claimInsert,
		"claimRead": st.claimRead, "lookup": st.lookup, "renew": st.renew, "complete": st.complete,
		"release": st.release, "markIndeterminate": st.markIndeterminate, "completeTx": st.completeTx,
		"completeTxGuarded": st.completeTxGuarded, "resolveComplete": st.resolveComplete,
		"resolveFree": st.resolveFree, "forget": st.forget, "sweep": st.sweep, "resolveGone": st.resolveGone,
		"cancelClaim": st.cancelClaim, "endLease": st.endLease, "countBacklog": st.countBacklog,
		"claimUpsert": st.claimUpsert, "announce": st.announce,
		"approve": st.approve, "approveGuarded": st.approveGuarded,
	}
}

// AlwaysBatch makes every Claim and Complete of a store built with
// Options.Batch go through the batch statements, a lone call as a
// batch of one. Call it before the store is used.
func (s *Store) AlwaysBatch() {
	s.claims.AlwaysBatch()
	s.completes.AlwaysBatch()
}

// SetOnBatch sets a function called with the size of every batch of claims
// (claims true) or completions sent. Set it before the store is used.
func (s *Store) SetOnBatch(f func(claims bool, size int)) { s.onBatch = f }

// ClaimTogether sends ps as one batch of claims, whatever else is out (the
// store needs Options.Batch), and returns each claim's answer: alone
// reports a claim the batch sent back to its caller.
func (s *Store) ClaimTogether(ctx context.Context, ps []store.ClaimParams) (res []store.Result, alone []bool, errs []error) {
	answers, errs := s.claims.Send(ctx, ps)
	for _, a := range answers {
		res = append(res, a.res)
		alone = append(alone, a.alone)
	}
	return res, alone, errs
}
