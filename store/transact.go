package store

import (
	"context"
	"errors"
)

// Transactor is the optional capability of a store that keeps its records
// in a database an activity's body can write to: the body's writes and the
// outcome recorded for its claim commit in one transaction of that database,
// or neither does. The dispatcher detects it on the store (a type assertion)
// for activities declared transactional; a store without it refuses such a
// declaration at registration.
//
// The promise it lets the dispatcher keep is exactly once for the effects
// that live in the store's own database: a record completed under a claim's
// token means the body's writes committed, and a record not completed means
// they did not. There is nothing to be indeterminate about.
type Transactor interface {
	// CheckTransactional reports whether a body whose writes go through db
	// can commit them with this store's records: nil when db is nil (the
	// body uses the transaction the store hands it) or the very handle the
	// store records through; otherwise an error saying why not. db is the
	// declaration's handle (activity.Policy.TransactionalDB), opaque to this package.
	CheckTransactional(db any) error

	// BeginTransaction begins a transaction for the pending claim held
	// under params.Token. The claim must have been taken by [Store.Claim]
	// first and is not read or locked here: renewals of its lease go on
	// outside the transaction while the body runs.
	//
	// An error means no transaction is open; the claim is as it was.
	BeginTransaction(ctx context.Context, params TransactionParams) (Transaction, error)
}

// TransactionParams are the parameters of [Transactor.BeginTransaction].
type TransactionParams struct {
	Tenant string
	Key    string
	// Token is the pending claim the transaction's commit is fenced by.
	Token int64
}

// Validate checks the parameters as every store does.
func (p TransactionParams) Validate() error { return validateFence(p.Tenant, p.Key, p.Token) }

// Transaction is one open transaction of a [Transactor], for one claim. It
// is used by one goroutine at a time: the dispatcher hands its context to
// the body, waits for the body to return, then calls exactly one of Commit
// and Rollback.
type Transaction interface {
	// Context returns ctx carrying the transaction, for the body to reach
	// through the store's own accessor (pgstore.Tx).
	Context(ctx context.Context) context.Context

	// Commit records outcome under the claim, fenced by its token, in the
	// transaction, and commits the transaction: the body's writes and the
	// completed record land together, or neither does. The fence is
	// checked by the database inside the transaction, so a transaction
	// whose claim is no longer held can never commit, whatever becomes of
	// the connection.
	//
	// It returns nil when the commit landed; an error matching
	// [ErrNotHolder] when the claim is no longer pending under the token
	// (taken over): the transaction was rolled back and nothing landed; an
	// error matching [ErrTransactionEnded] when the body ended the
	// transaction itself; any other error when the commit failed or its
	// answer was lost. Then the record says what happened: completed under
	// the token means it landed, still pending under the token means it did
	// not. A caller reads it with a fenced write that waits for the
	// transaction to end (see the dispatcher's recovery), never with a bare
	// read, which may run before a commit still in flight.
	Commit(ctx context.Context, outcome []byte) error

	// Rollback ends the transaction without committing: none of the body's
	// writes land and the claim is left as it stands, pending, for the
	// caller to release. It is safe to call after a failed Commit.
	Rollback(ctx context.Context) error
}

// ErrTransactionEnded is returned by [Transaction.Commit] when the body
// committed or rolled back the transaction it was given by itself: what it
// wrote may have landed without the record, and nothing can say so. A body
// must leave ending its transaction to the dispatcher.
var ErrTransactionEnded = errors.New("the transaction was ended by the activity's body")

// ErrNotTransactional matches the refusal of a transactional declaration by
// a store that cannot run the body in a transaction of its own database, or
// not with the handle the declaration names.
var ErrNotTransactional = errors.New("the store cannot commit the activity's writes with its records")
