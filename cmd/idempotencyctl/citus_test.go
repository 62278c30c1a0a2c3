package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// citusURLEnv names the Citus coordinator make test-citus starts (see
// pgstore's citus_test.go); without it the test skips.
const citusURLEnv = "IDEMPOTENCY_TEST_CITUS_URL"

// TestCitusThroughFlags runs the operator's commands against a Citus
// cluster as an operator does, with -portable (the mode workers on Citus
// run in): schema makes the table and distributes it by tenant; show,
// list (in a tenant and across tenants), resolve, sweep and forget work on
// records on the workers.
func TestCitusThroughFlags(t *testing.T) {
	t.Parallel()
	url := os.Getenv(citusURLEnv)
	if url == "" {
		t.Skipf("no Citus cluster: %s is unset (make test-citus starts one)", citusURLEnv)
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	schema := testenv.UniqueName("c")
	_, err = pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	global := []string{"-store", "postgres", "-postgres-url", url, "-schema", schema, "-portable"}
	with := func(args ...string) []string { return append(append([]string{}, global...), args...) }
	place := postgresPlace(cfg)
	table := schema + "." + pgstore.DefaultTable

	for range 2 {
		r := invokeReal(t, with("schema")...)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, "schema ready: PostgreSQL table "+table+" at "+place+" and its indexes exist\n", r.stdout)
	}
	var column string
	require.NoError(t, pool.QueryRow(ctx, `SELECT column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition
WHERE logicalrelid = to_regclass($1)`, pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize()).Scan(&column),
		"schema must distribute the table")
	assert.Equal(t, pgstore.DistributionColumn, column)

	st, err := pgstore.New(pool, pgstore.Options{Schema: schema, Capabilities: &pgstore.Capabilities{}, TTL: time.Hour})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	for _, tenant := range []string{"acme", "globex"} {
		seedIndeterminate(t, st, tenant, testKey, tenant+" timed out")
	}

	r := invokeReal(t, with("show", "-tenant", "acme", "-key", testKey, "-json")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	var rec recordJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
	assert.Equal(t, "indeterminate", rec.State)
	assert.Equal(t, "acme timed out", rec.Reason)

	r = invokeReal(t, with("list", "-tenant", "acme")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, testKey)
	assert.NotContains(t, r.stdout, "globex")

	r = invokeReal(t, with("list", "-all-tenants")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "acme timed out")
	assert.Contains(t, r.stdout, "globex timed out")

	r = invokeReal(t, with("resolve", "-tenant", "acme", "-key", testKey, "-outcome", `{"seat":"12A"}`, "-by", "ops")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	res, err := st.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: testKey, Holder: "retry", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, res.Status)
	var got map[string]any
	require.NoError(t, interceptor.DecodeOutcome(nil, res.Record.Outcome, &got))
	assert.Equal(t, map[string]any{"seat": "12A"}, got)
	assert.Equal(t, "ops", res.Record.Resolution.By)

	r = invokeReal(t, with("resolve", "-tenant", "globex", "-key", testKey, "-free", "-yes")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	r = invokeReal(t, with("list", "-all-tenants")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.NotContains(t, r.stdout, "timed out")

	// An expired record on each worker's shards, swept.
	_, err = pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize()+`
	(tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome)
SELECT 'tenant-' || i, 'old', 2, 'h', i, now() - interval '2 hours', now() - interval '1 hour', now() - interval '2 hours', now() - interval '2 hours', ''
FROM generate_series(1, 10) AS i`)
	require.NoError(t, err)
	r = invokeReal(t, with("sweep")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "swept 10 expired records from ")

	r = invokeReal(t, with("forget", "-tenant", "acme", "-yes")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "erased 1 record of tenant acme\n", r.stdout)
}
