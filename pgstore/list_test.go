package pgstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// TestListPlans shows that the listings of what waits in a tenant read the
// partial index of the records that are not completed, never the table
// sequentially, on a table whose bulk is completed records of many tenants,
// under custom and generic plans alike; and that in a tenant where many
// records wait, a page is read in the index's order, with no sort.
func TestListPlans(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	ctx := context.Background()
	loadListingTable(t, pool, s.TableName())

	waiting := []store.State{store.StateIndeterminate, store.StatePending}
	for _, tenant := range []string{"tenant-3", "busy"} {
		page, err := s.List(ctx, store.ListParams{Tenant: tenant, States: []store.State{store.StateIndeterminate}, Limit: 2})
		require.NoError(t, err)
		require.Len(t, page.Records, 2)
		require.NotEmpty(t, page.Next)
		for _, tc := range []struct {
			name string
			p    store.ListParams
		}{
			{"indeterminate, newest first", store.ListParams{Tenant: tenant, States: []store.State{store.StateIndeterminate}}},
			{"indeterminate, next page", store.ListParams{Tenant: tenant, States: []store.State{store.StateIndeterminate}, Cursor: page.Next, Limit: 2}},
			{"stale, oldest first", store.ListParams{Tenant: tenant, Stale: true, Order: store.OldestFirst}},
			{"waiting, older than an hour", store.ListParams{Tenant: tenant, States: waiting, Stale: true, OlderThan: time.Hour}},
		} {
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				t.Run(tenant+"/"+tc.name+"/"+mode, func(t *testing.T) {
					sql, args, err := s.ListSQL(tc.p, false, time.Now())
					require.NoError(t, err)
					plan := explain(t, pool, mode, sql, args)
					require.Contains(t, plan, "Index Scan", plan)
					require.Contains(t, plan, s.ListIndexName(), plan)
					require.NotContains(t, plan, "Seq Scan", plan)
					if tenant == "busy" {
						require.NotContains(t, plan, "Sort", plan)
					}
				})
			}
		}
	}

	// Across tenants, what waits is read from the same index: the whole of
	// it for the states it holds (no order serves a listing by claim time
	// across tenants), never the table. These statements are planned with
	// their arguments on every call (see TestListingsPlanWithTheirArguments):
	// a generic plan, blind to the clock, reads them through the expiry
	// index on this table.
	page, err := s.ListAcrossTenants(ctx, store.ListParams{States: waiting, Stale: true, Limit: 2})
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)
	now := time.Now()
	backlogSQL, backlogArgs := s.CountBacklogSQL(now)
	for _, tc := range []struct {
		name string
		sql  func() (string, []any, error)
	}{
		{"across tenants, waiting", func() (string, []any, error) {
			return s.ListSQL(store.ListParams{States: waiting, Stale: true}, true, now)
		}},
		{"across tenants, waiting, next page", func() (string, []any, error) {
			return s.ListSQL(store.ListParams{States: waiting, Stale: true, Cursor: page.Next}, true, now)
		}},
		{"across tenants, indeterminate, oldest first", func() (string, []any, error) {
			return s.ListSQL(store.ListParams{States: []store.State{store.StateIndeterminate}, Order: store.OldestFirst}, true, now)
		}},
		{"backlog count", func() (string, []any, error) { return backlogSQL, backlogArgs, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql, args, err := tc.sql()
			require.NoError(t, err)
			plan := explain(t, pool, "force_custom_plan", sql, args)
			require.Contains(t, plan, s.ListIndexName(), plan)
			require.NotContains(t, plan, "Seq Scan", plan)
		})
	}
}

// TestListingsPlanWithTheirArguments shows that the listings and the
// backlog count never settle on a generic plan: on a connection that has
// run each of them more than five times, none of the statements it keeps
// prepared on the table was ever planned generically. (Run as cached
// prepared statements, ListAcrossTenants and CountBacklog switched to their
// generic plans on the sixth call here, reading every live row through the
// expiry index instead of the records that wait.)
func TestListingsPlanWithTheirArguments(t *testing.T) {
	t.Parallel()
	_, schema := pgenv.Postgres(t)
	pool := pgenv.PostgresPool(t, 1) // one connection: every call's statements are on it
	s := newStore(t, pool, schema, pgstore.Options{})
	ctx := context.Background()
	loadListingTable(t, pool, s.TableName())

	waiting := []store.State{store.StateIndeterminate, store.StatePending}
	for range 10 {
		_, err := s.ListAcrossTenants(ctx, store.ListParams{States: waiting, Stale: true})
		require.NoError(t, err)
		_, err = s.List(ctx, store.ListParams{Tenant: "busy", States: waiting, Stale: true})
		require.NoError(t, err)
		_, err = s.CountBacklog(ctx)
		require.NoError(t, err)
	}
	rows, err := pool.Query(ctx, `SELECT statement, generic_plans FROM pg_prepared_statements WHERE strpos(statement, $1) > 0`, s.TableName())
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var sql string
		var generic int64
		require.NoError(t, rows.Scan(&sql, &generic))
		require.Zero(t, generic, "planned generically %d times: %s", generic, sql)
	}
	require.NoError(t, rows.Err())
}

// explain returns the plan of sql with args, planned under the
// plan_cache_mode given. The statement is prepared and run by EXECUTE with
// its arguments spelled as literals: EXPLAIN of a statement with bind
// parameters plans it with their values, a custom plan whatever the mode,
// and only a prepared statement's EXECUTE shows its generic plan.
func explain(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, mode, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	lits := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case time.Time:
			lits[i] = "'" + v.Format(time.RFC3339Nano) + "'"
		case int:
			lits[i] = strconv.Itoa(v)
		default:
			t.Fatalf("argument %d is a %T, which explain cannot spell as a literal", i+1, a)
		}
	}
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SET LOCAL enable_seqscan = on")
	require.NoError(t, err)
	// A prepared statement outlives the transaction: each gets a name of
	// its own, and is deallocated once explained.
	name := "listing_" + strconv.FormatInt(explained.Add(1), 10)
	_, err = tx.Exec(ctx, "PREPARE "+name+" AS "+sql)
	require.NoError(t, err)
	rows, err := tx.Query(ctx, "EXPLAIN EXECUTE "+name+"("+strings.Join(lits, ", ")+")")
	require.NoError(t, err)
	var lines []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(t, rows.Err())
	_, err = tx.Exec(ctx, "DEALLOCATE "+name)
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// explained numbers the statements explain prepares.
var explained atomic.Int64

// TestEnsureSchemaMigratesEarlierTable brings a table made before records
// kept their origin, their resolution or a listing index up to date: its
// records read as before (zero Origin and Resolution), are listed, and take
// a resolution with its trail.
func TestEnsureSchemaMigratesEarlierTable(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	ctx := context.Background()
	table := testenv.UniqueName("old")
	qualified := pgx.Identifier{schema, table}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+qualified+` (
	tenant      text        NOT NULL,
	key         text        NOT NULL,
	state       smallint    NOT NULL CHECK (state IN (1, 2, 3)),
	holder      text        NOT NULL,
	token       bigint      NOT NULL,
	lease_until timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL,
	outcome     bytea,
	reason      text        NOT NULL DEFAULT '',
	PRIMARY KEY (tenant, key)
)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO `+qualified+` VALUES
	('t', 'waiting', 3, 'h', 42, now(), now() + interval '1 hour', now() - interval '1 minute', now(), NULL, 'lost'),
	('t', 'done', 2, 'h', 43, now(), now() + interval '1 hour', now() - interval '2 minutes', now(), 'ok', '')`)
	require.NoError(t, err)

	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: table})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.EnsureSchema(ctx))
	require.NoError(t, s.EnsureSchema(ctx), "a second run changes nothing")

	rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "waiting"})
	require.NoError(t, err)
	require.Equal(t, store.StateIndeterminate, rec.State)
	require.Equal(t, store.Origin{}, rec.Origin)
	require.Equal(t, store.Resolution{}, rec.Resolution)
	var exists bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{schema, s.ListIndexName()}.Sanitize()).Scan(&exists))
	require.True(t, exists, "the listing index was created")

	page, err := s.List(ctx, store.ListParams{Tenant: "t", Order: store.OldestFirst})
	require.NoError(t, err)
	require.Len(t, page.Records, 2)
	require.Equal(t, "done", page.Records[0].Key)

	err = s.Resolve(ctx, store.ResolveParams{Tenant: "t", Key: "waiting", Decision: store.ActionComplete, Outcome: []byte("ok"), Token: 41})
	require.ErrorIs(t, err, store.ErrNotHolder)
	require.NoError(t, s.Resolve(ctx, store.ResolveParams{Tenant: "t", Key: "waiting", Decision: store.ActionComplete, Outcome: []byte("ok"),
		Token: 42, By: "alice", Reason: "confirmed", Reference: "T-1"}))
	rec, err = s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "waiting"})
	require.NoError(t, err)
	require.Equal(t, "alice", rec.Resolution.By)
	require.Equal(t, store.ActionComplete, rec.Resolution.Action)
}

// BenchmarkWaitingIndexCost measures what the listings' partial index costs
// the hot path: a fresh key's Claim and Complete on a table with the index
// (as EnsureSchema makes it) over the same on a table without it, in the
// same process on the same pool, 8 callers. It reports x-without-index.
func BenchmarkWaitingIndexCost(b *testing.B) {
	_, schema := pgenv.Postgres(b)
	pool := pgenv.PostgresPool(b, 16)
	ctx := context.Background()
	open := func(dropIndex bool) *pgstore.Store {
		s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: testenv.UniqueName("bench")})
		require.NoError(b, err)
		b.Cleanup(s.Close)
		require.NoError(b, s.EnsureSchema(ctx))
		if dropIndex {
			_, err := pool.Exec(ctx, "DROP INDEX "+pgx.Identifier{schema, s.ListIndexName()}.Sanitize())
			require.NoError(b, err)
		}
		return s
	}
	var seq atomic.Int64
	op := func(s *pgstore.Store) func(context.Context) error {
		return func(ctx context.Context) error {
			key := "k" + strconv.FormatInt(seq.Add(1), 36)
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: "bench", Key: key, Holder: "bench", Lease: time.Minute})
			if err != nil {
				return err
			}
			return s.Complete(ctx, store.CompleteParams{Tenant: "bench", Key: key, Token: res.Record.Token, Outcome: []byte("ok")})
		}
	}
	without, with := open(true), open(false)
	var basePerOp float64
	b.Run("without-index", func(b *testing.B) {
		runCallers(b, 8, op(without))
		basePerOp = float64(b.Elapsed()) / float64(b.N)
	})
	b.Run("with-index", func(b *testing.B) {
		runCallers(b, 8, op(with))
		if basePerOp > 0 {
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/basePerOp, "x-without-index")
		}
	})
}

// loadListingTable fills table with 100,000 completed records over 20
// tenants, 50 indeterminate and 50 pending records in each of them, and a
// tenant, "busy", where 20,000 records wait; then analyzes it.
func loadListingTable(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO `+table+` (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome)
SELECT 'tenant-' || (i % 20), 'key-' || i,
	CASE WHEN i % 1000 < 5 THEN 3 WHEN i % 1000 < 10 THEN 1 ELSE 2 END,
	'h', i + 1, now() - interval '1 minute', now() + interval '1 day',
	now() - i * interval '1 second', now(), ''::bytea
FROM generate_series(1, 100000) AS i
UNION ALL
SELECT 'busy', 'key-' || i, CASE WHEN i % 2 = 0 THEN 3 ELSE 1 END,
	'h', i + 1, now() - interval '1 minute', now() + interval '1 day', now() - i * interval '1 second', now(), ''
FROM generate_series(1, 20000) AS i`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE `+table)
	require.NoError(t, err)
}
