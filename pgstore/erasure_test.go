package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// After Forget, nothing of the tenant is left in the store's schema: every
// table the store made (the records, the commit guard's) is scanned for
// the tenant's name and key, in every state the tenant's records were in,
// a transactional one included. Another tenant's rows are untouched.
func TestForgetLeavesNothingOfTheTenant(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	ctx := context.Background()
	for _, tenant := range []string{"acme", "globex"} {
		for _, key := range []string{"pending", "completed", "indeterminate", "tx"} {
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: "h", Lease: time.Minute})
			require.NoError(t, err)
			switch key {
			case "completed":
				require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: key, Token: res.Record.Token, Outcome: []byte("o")}))
			case "indeterminate":
				require.NoError(t, s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: key, Token: res.Record.Token, Reason: "r"}))
			case "tx":
				txn, err := s.BeginTransaction(ctx, store.TransactionParams{Tenant: tenant, Key: key, Token: res.Record.Token})
				require.NoError(t, err)
				require.NoError(t, txn.Commit(ctx, []byte("o")))
			}
		}
	}
	n, err := s.Forget(ctx, store.ForgetParams{Tenant: "acme"})
	require.NoError(t, err)
	assert.Equal(t, 4, n)

	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	left := 0
	for _, table := range tables {
		var n int
		q := "SELECT count(*) FROM " + pgx.Identifier{schema, table}.Sanitize() + " r WHERE r::text LIKE '%acme%'"
		require.NoError(t, pool.QueryRow(ctx, q).Scan(&n), table)
		assert.Zero(t, n, "rows of the forgotten tenant left in %s", table)
		left += n
	}
	t.Logf("tables scanned: %v; rows of acme left: %d", tables, left)
	for _, key := range []string{"pending", "completed", "indeterminate", "tx"} {
		_, err := s.Lookup(ctx, store.LookupParams{Tenant: "globex", Key: key})
		assert.NoError(t, err, "globex's %s record", key)
	}
}
