package interceptor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

type seatRequest struct {
	Seat string `json:"seat"`
}

func reserveSeat(context.Context, seatRequest) (string, error) { return "", nil }

// transactor is a memory store that claims the Transactor capability and
// accepts only the handle it was given: enough for Declare to judge.
type transactor struct {
	*store.Memory
	db any
}

func (s transactor) CheckTransactional(db any) error {
	if db == nil || db == s.db {
		return nil
	}
	return errors.New("another handle: " + store.ErrNotTransactional.Error())
}

func (transactor) BeginTransaction(context.Context, store.TransactionParams) (store.Transaction, error) {
	return nil, errors.New("not used")
}

func TestDeclareRefusesTransactionalOnStoresWithoutTransactions(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	ic, err := interceptor.New(interceptor.Options{Store: mem})
	require.NoError(t, err)
	t.Cleanup(ic.Stop)
	plain := activity.Effectful(func(context.Context, seatRequest) error { return nil }, "seat")
	plain, err = plain.WithName("plain")
	require.NoError(t, err)
	err = ic.Declare(plain, activity.Transactional(reserveSeat, "seat"))
	require.Error(t, err)
	assert.ErrorIs(t, err, store.ErrNotTransactional)
	assert.ErrorIs(t, err, activity.ErrInvalidDeclaration)
	var te *interceptor.TransactionalError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "reserveSeat", te.Activity)
	assert.Equal(t, "*store.Memory", te.Store)
	assert.Contains(t, err.Error(), "cannot commit together", "the message says why")
	_, ok := ic.Declaration("plain")
	assert.False(t, ok, "a refused Declare applied a declaration")

	// Not transactional: declared as ever.
	require.NoError(t, ic.Declare(activity.Effectful(reserveSeat, "seat")))
}

func TestDeclareRefusesAForeignHandle(t *testing.T) {
	t.Parallel()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	pool := &struct{ name string }{"the store's"}
	ic, err := interceptor.New(interceptor.Options{Store: transactor{Memory: mem, db: pool}})
	require.NoError(t, err)
	t.Cleanup(ic.Stop)

	foreign, err := activity.Declare(reserveSeat, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"seat"},
		Transactional: true, TransactionalDB: &struct{ name string }{"another"}})
	require.NoError(t, err)
	err = ic.Declare(foreign)
	require.ErrorIs(t, err, store.ErrNotTransactional)
	assert.Contains(t, err.Error(), "another handle")

	own, err := activity.Declare(reserveSeat, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"seat"},
		Transactional: true, TransactionalDB: pool})
	require.NoError(t, err)
	require.NoError(t, ic.Declare(own))
}
