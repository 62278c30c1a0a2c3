package pgstore_test

import (
	"context"
	"errors"
	"flag"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/compat"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store/storetest"
)

// The specification's PostgreSQL records (spec/vectors/records-postgres.json,
// see spec/SPEC.md): the scenarios of internal/compat run through the real
// store on the real PostgreSQL, and each key's row read back with every
// column as PostgreSQL's text output (TimeZone UTC, bytea_output hex), NULL
// as null, and the token written as its placeholder. Checked byte for
// byte; -update writes the file:
//
//	go test ./pgstore/ -run SpecVectors -update
var updateSpec = flag.Bool("update", false, "write the specification's vectors (spec/vectors) instead of checking them")

// specRow reads the row of tenant's key, every column as text.
func specRow(t testing.TB, pool *pgxpool.Pool, schema string, cols []string, tenant, key string, m *compat.SpecMasker) any {
	t.Helper()
	ctx := context.Background()
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = pgx.Identifier{c}.Sanitize() + "::text"
	}
	vals := make([]*string, len(cols))
	dst := make([]any, len(cols))
	for i := range vals {
		dst[i] = &vals[i]
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL TimeZone = 'UTC'"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL bytea_output = 'hex'"); err != nil {
			return err
		}
		q := "SELECT "
		for i, e := range exprs {
			if i > 0 {
				q += ", "
			}
			q += e
		}
		q += " FROM " + pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize() + " WHERE tenant = $1 AND key = $2"
		return tx.QueryRow(ctx, q, tenant, key).Scan(dst...)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	require.NoError(t, err)
	row := make(map[string]any, len(cols))
	for i, c := range cols {
		if vals[i] == nil {
			row[c] = nil
		} else {
			row[c] = m.Mask(*vals[i])
		}
	}
	return row
}

func TestSpecVectorsRecords(t *testing.T) {
	pool, schema := pgenv.Postgres(t)
	clock := storetest.NewClock(compat.Epoch)
	st, err := pgstore.New(pool, pgstore.Options{Schema: schema, Clock: clock, TTL: compat.SpecTTL})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.EnsureSchema(context.Background()))
	cols := readCatalog(t, pool, schema, pgstore.DefaultTable).order
	scenarios := compat.SpecScenarios(t, st, clock, func(tenant, key string, m *compat.SpecMasker) any {
		return specRow(t, pool, schema, cols, tenant, key, m)
	})
	compat.CheckSpecFile(t, "../spec/vectors/records-postgres.json", "pgstore_test.TestSpecVectorsRecords", scenarios, *updateSpec)
}
