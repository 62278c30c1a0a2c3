package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// The store on a real Citus cluster (a coordinator and two worker nodes),
// as a user runs it there: the capabilities DetectCapabilities returns,
// and the table EnsureSchema makes and distributes by tenant. These tests
// run only when citusURLEnv names the cluster's coordinator (make
// test-citus builds Citus and starts one: scripts/test-citus.sh);
// elsewhere they skip.

// citusURLEnv names the variable holding the Citus coordinator's URL.
const citusURLEnv = "IDEMPOTENCY_TEST_CITUS_URL"

// citusPool returns a pool of at most maxConns connections on the Citus
// coordinator, closed when the test ends; the test is skipped when no
// cluster is named, and fails when the named one does not answer.
func citusPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv(citusURLEnv)
	if url == "" {
		t.Skipf("no Citus cluster: %s is unset (make test-citus starts one)", citusURLEnv)
	}
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	cfg.MinConns = 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pool.Ping(ctx), "the Citus coordinator at %s does not answer", url)
	return pool
}

// citus returns a pool on the coordinator and a schema of this test's own,
// dropped (with its distributed tables, on every node) when the test ends.
func citus(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	pool := citusPool(t, 4)
	schema := testenv.UniqueName("c")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	return pool, schema
}

// citusCaps asks the coordinator what the store may use there, as a user's
// start does, and checks the answer: Citus, and none of the capabilities.
func citusCaps(t testing.TB, pool *pgxpool.Pool) *pgstore.Capabilities {
	t.Helper()
	engine, caps, err := pgstore.DetectCapabilities(context.Background(), pool)
	require.NoError(t, err)
	require.Equal(t, pgstore.EngineCitus, engine)
	require.Equal(t, pgstore.Capabilities{}, caps)
	return &caps
}

// newCitusStore is newStore on the cluster, with the detected capabilities
// unless opts names others; EnsureSchema must have distributed its table.
func newCitusStore(t testing.TB, pool *pgxpool.Pool, schema string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	if opts.Capabilities == nil {
		opts.Capabilities = citusCaps(t, pool)
	}
	s := newStore(t, pool, schema, opts)
	requireDistributed(t, pool, s.TableName())
	// Each table dropped when its test ends: a schema's hundreds of
	// distributed tables, dropped at once, take minutes.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		guard := pgx.Identifier{schema, s.Options().Table + "_txguard"}.Sanitize()
		if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+s.TableName()+", "+guard); err != nil {
			t.Errorf("drop %s: %v", s.TableName(), err)
		}
	})
	return s
}

// requireDistributed checks that table (quoted) is distributed by tenant:
// a hash-distributed table of Citus whose shards are on both workers.
func requireDistributed(t testing.TB, pool *pgxpool.Pool, table string) {
	t.Helper()
	var column string
	var nodes int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT column_to_column_name(p.logicalrelid, p.partkey),
	(SELECT count(DISTINCT nodeport) FROM citus_shards c WHERE c.table_name = p.logicalrelid)
FROM pg_dist_partition p WHERE p.logicalrelid = to_regclass($1) AND p.partmethod = 'h'`,
		table).Scan(&column, &nodes), "%s is not a distributed table", table)
	require.Equal(t, pgstore.DistributionColumn, column)
	require.Equal(t, 2, nodes, "the shards of %s are not on both workers", table)
}

// citusLedger is newLedger on the cluster, its table distributed: with
// colocated, by tenant, every row in the shard of tenant "tenant-a" (the
// tenant RunTransactor claims in), so a body's writes and its record are
// on one worker; otherwise by tag, so they are on any worker, and the
// commit spans nodes (Citus commits it in two phases).
func citusLedger(t *testing.T, pool *pgxpool.Pool, schema string, colocated bool) *ledger {
	t.Helper()
	l := newLedger(t, pool, schema)
	ctx := context.Background()
	column := "tag"
	if colocated {
		_, err := pool.Exec(ctx, "ALTER TABLE "+l.table+" ADD COLUMN tenant text NOT NULL DEFAULT 'tenant-a'")
		require.NoError(t, err)
		column = "tenant"
	}
	_, err := pool.Exec(ctx, "SELECT create_distributed_table($1, $2)", l.table, column)
	require.NoError(t, err)
	return l
}

// The whole store contract on Citus, each store's table distributed by
// tenant: storetest.Run (through the per-call statements and through the
// batch statements), RunTransactor (the body's writes colocated with the
// record, and on another node) and RunClockSkew.
func TestCitusConformance(t *testing.T) {
	t.Parallel()
	opts := func(cfg storetest.Config) pgstore.Options {
		return pgstore.Options{
			TTL: cfg.TTL, Clock: cfg.Clock,
			PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond,
		}
	}
	t.Run("Store", func(t *testing.T) {
		t.Parallel()
		pool, schema := citus(t)
		storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
			return newCitusStore(t, pool, schema, opts(cfg))
		})
	})
	t.Run("Batched", func(t *testing.T) {
		t.Parallel()
		pool, schema := citus(t)
		var claims, completions atomic.Int64
		storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
			o := opts(cfg)
			o.Batch = true
			s := newCitusStore(t, pool, schema, o)
			s.AlwaysBatch()
			s.SetOnBatch(func(claim bool, size int) {
				if claim {
					claims.Add(int64(size))
				} else {
					completions.Add(int64(size))
				}
			})
			return s
		})
		t.Cleanup(func() {
			if !t.Failed() && (claims.Load() == 0 || completions.Load() == 0) {
				t.Errorf("batched %d claims and %d completions: the suite must go through both", claims.Load(), completions.Load())
			}
		})
	})
	for _, colocated := range []bool{true, false} {
		name := "Transactor/AcrossNodes"
		if colocated {
			name = "Transactor/Colocated"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool, schema := citus(t)
			l := citusLedger(t, pool, schema, colocated)
			storetest.RunTransactor(t, func(t *testing.T, cfg storetest.Config) storetest.Transactional {
				return storetest.Transactional{Store: newCitusStore(t, pool, schema, opts(cfg)), Write: l.write, Effects: l.effects}
			})
		})
	}
	t.Run("ClockSkew", func(t *testing.T) {
		t.Parallel()
		pool, schema := citus(t)
		caps := citusCaps(t, pool)
		table := testenv.UniqueName("r")
		storetest.RunClockSkew(t, func(t *testing.T, local store.Clock, ttl time.Duration) store.Store {
			s, err := pgstore.NewWithLocalClock(pool, pgstore.Options{Schema: schema, Table: table, TTL: ttl, Capabilities: caps}, local)
			require.NoError(t, err)
			require.NoError(t, s.EnsureSchema(context.Background()))
			t.Cleanup(s.Close)
			requireDistributed(t, pool, s.TableName())
			return s
		})
	})
}

// The commit guard of transactional bodies on Citus: the guard's table is
// a table of the coordinator, the record's on a worker, and the body's
// writes on a worker too (colocated with the record, or not).
func TestCitusTransactionGuard(t *testing.T) {
	t.Parallel()
	for _, colocated := range []bool{true, false} {
		name := "AcrossNodes"
		if colocated {
			name = "Colocated"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			guardCases(t, func(t *testing.T, dropGuard bool) txSetup {
				pool, schema := citus(t)
				table := testenv.UniqueName("r")
				s := newCitusStore(t, pool, schema, pgstore.Options{Table: table})
				if dropGuard {
					_, err := pool.Exec(context.Background(), "DROP TABLE "+pgx.Identifier{schema, table + "_txguard"}.Sanitize())
					require.NoError(t, err)
				}
				return txSetup{s: s, l: citusLedger(t, pool, schema, colocated)}
			})
		})
	}
}

// txSetup is a store and a ledger a body writes to.
type txSetup struct {
	s *pgstore.Store
	l *ledger
}

// guardCases are the commit guard's cases (tx_test.go's, on a store the
// setup makes: without its guard's table when dropGuard), for the
// portable mode's approval in a statement of its own.
func guardCases(t *testing.T, setup func(t *testing.T, dropGuard bool) txSetup) {
	// The tenant the ledger of citusLedger colocates with.
	const tenant = "tenant-a"
	begin := func(t *testing.T, dropGuard bool) (*pgstore.Store, *ledger, store.Record, store.Transaction) {
		t.Helper()
		su := setup(t, dropGuard)
		ctx := context.Background()
		res, err := su.s.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: "k", Holder: "h", Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status)
		txn, err := su.s.BeginTransaction(ctx, store.TransactionParams{Tenant: tenant, Key: "k", Token: res.Record.Token})
		require.NoError(t, err)
		t.Cleanup(func() { _ = txn.Rollback(context.Background()) })
		return su.s, su.l, res.Record, txn
	}
	state := func(t *testing.T, s *pgstore.Store) store.Record {
		t.Helper()
		got, err := s.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: "k"})
		require.NoError(t, err)
		return got
	}
	t.Run("CommitLands", func(t *testing.T) {
		t.Parallel()
		s, l, rec, txn := begin(t, false)
		require.NoError(t, l.write(txn.Context(context.Background()), "body"))
		require.NoError(t, txn.Commit(context.Background(), []byte("o")))
		assert.Equal(t, 1, l.effects(t, "body"))
		got := state(t, s)
		assert.Equal(t, store.StateCompleted, got.State)
		assert.Equal(t, rec.Token, got.Token)
		assert.Equal(t, []byte("o"), got.Outcome)
	})
	for _, commit := range []string{"COMMIT", "COMMIT AND CHAIN", "END"} {
		t.Run("BodySends/"+commit, func(t *testing.T) {
			t.Parallel()
			s, l, rec, txn := begin(t, false)
			ctx := txn.Context(context.Background())
			require.NoError(t, l.write(ctx, "body"))
			tx, err := pgstore.Tx(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, commit)
			require.Error(t, err, "the guard refuses the body's %s", commit)
			assert.Zero(t, l.effects(t, "body"), "the body's %s landed its writes", commit)
			taken, err := s.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: "k", Holder: "taker", Lease: time.Minute, Supersede: rec.Token})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, taken.Status)
			require.Error(t, txn.Commit(context.Background(), []byte("o")))
			assert.Zero(t, l.effects(t, "body"), "the body's writes landed beside a taker that will write them again")
		})
	}
	t.Run("BodyChainsARollback", func(t *testing.T) {
		t.Parallel()
		s, l, _, txn := begin(t, false)
		ctx := txn.Context(context.Background())
		require.NoError(t, l.write(ctx, "before"))
		tx, err := pgstore.Tx(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "ROLLBACK AND CHAIN")
		require.NoError(t, err)
		require.NoError(t, l.write(ctx, "after"))
		require.ErrorIs(t, txn.Commit(context.Background(), []byte("o")), store.ErrTransactionEnded)
		assert.Zero(t, l.effects(t, "before"))
		assert.Zero(t, l.effects(t, "after"), "the chained transaction committed with the record")
		assert.Equal(t, store.StatePending, state(t, s).State)
	})
	t.Run("BodyFailedAStatement", func(t *testing.T) {
		t.Parallel()
		s, l, rec, txn := begin(t, false)
		ctx := txn.Context(context.Background())
		require.NoError(t, l.write(ctx, "body"))
		tx, err := pgstore.Tx(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "SELECT 1/0")
		require.Error(t, err)
		err = txn.Commit(context.Background(), []byte("o"))
		require.Error(t, err)
		assert.NotErrorIs(t, err, store.ErrNotHolder)
		assert.Zero(t, l.effects(t, "body"))
		got := state(t, s)
		assert.Equal(t, store.StatePending, got.State)
		assert.Equal(t, rec.Token, got.Token)
	})
	t.Run("TakenOverBeforeTheCommit", func(t *testing.T) {
		t.Parallel()
		s, l, rec, txn := begin(t, false)
		require.NoError(t, l.write(txn.Context(context.Background()), "body"))
		taken, err := s.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: "k", Holder: "taker", Lease: time.Minute, Supersede: rec.Token})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, taken.Status)
		require.ErrorIs(t, txn.Commit(context.Background(), []byte("o")), store.ErrNotHolder)
		assert.Zero(t, l.effects(t, "body"))
		assert.Equal(t, taken.Record.Token, state(t, s).Token)
	})
	// Without the guard's table, bodies run unguarded, as on a schema made
	// before the guard: the commit still lands both, and a body's own
	// COMMIT is caught afterwards.
	t.Run("WithoutTheGuard", func(t *testing.T) {
		t.Parallel()
		s, l, _, txn := begin(t, true)
		require.NoError(t, l.write(txn.Context(context.Background()), "body"))
		require.NoError(t, txn.Commit(context.Background(), []byte("o")))
		assert.Equal(t, 1, l.effects(t, "body"))
		assert.Equal(t, store.StateCompleted, state(t, s).State)
	})
	t.Run("WithoutTheGuard/BodySendsCOMMIT", func(t *testing.T) {
		t.Parallel()
		s, l, _, txn := begin(t, true)
		ctx := txn.Context(context.Background())
		require.NoError(t, l.write(ctx, "body"))
		tx, err := pgstore.Tx(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "COMMIT")
		require.NoError(t, err)
		require.ErrorIs(t, txn.Commit(context.Background(), []byte("o")), store.ErrTransactionEnded)
		assert.Equal(t, store.StatePending, state(t, s).State)
	})
}

// EnsureSchema on Citus distributes the table it makes by tenant, once,
// however many replicas run it at once, and leaves it distributed when run
// again.
func TestCitusEnsureSchemaDistributes(t *testing.T) {
	t.Parallel()
	pool, schema := citus(t)
	caps := citusCaps(t, pool)
	table := testenv.UniqueName("r")
	const replicas = 4
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		// Each replica on a pool of its own, as replicas are.
		s, err := pgstore.New(citusPool(t, 2), pgstore.Options{Schema: schema, Table: table, Capabilities: caps})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.EnsureSchema(context.Background())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "replica %d", i)
	}
	s := newCitusStore(t, pool, schema, pgstore.Options{Table: table})
	require.NoError(t, s.EnsureSchema(context.Background()), "run again")
	requireDistributed(t, pool, s.TableName())
	// The indexes are on the shards, the guard's table on the coordinator
	// alone.
	for _, idx := range []string{table + "_expires_at_idx", s.ListIndexName()} {
		var shards int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM run_command_on_workers(
	format('SELECT count(*) FROM pg_indexes WHERE schemaname = %L AND indexname LIKE %L', $1::text, $2::text || '%'))
WHERE success AND result::int > 0`, schema, idx).Scan(&shards))
		assert.Equal(t, 2, shards, "index %s is not on the shards of both workers", idx)
	}
	var guardDistributed bool
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1))",
		pgx.Identifier{schema, table + "_txguard"}.Sanitize()).Scan(&guardDistributed))
	assert.False(t, guardDistributed, "the guard's table is the coordinator's")
}

// EnsureSchema distributes a table it finds empty and undistributed (made
// before Citus was installed), but refuses one that holds records, or that
// Citus distributes otherwise, naming the statement that distributes it;
// the statement run, the store works on the records that were there.
func TestCitusEnsureSchemaRefuses(t *testing.T) {
	t.Parallel()
	pool, schema := citus(t)
	caps := citusCaps(t, pool)
	ctx := context.Background()
	open := func(table string) *pgstore.Store {
		s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: table, Capabilities: caps})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	// create makes the store's table as EnsureSchema does, undistributed.
	create := func(s *pgstore.Store) {
		_, err := pool.Exec(ctx, s.Statements()["createTable"])
		require.NoError(t, err)
	}

	t.Run("Empty", func(t *testing.T) {
		s := open(testenv.UniqueName("r"))
		create(s)
		require.NoError(t, s.EnsureSchema(ctx))
		requireDistributed(t, pool, s.TableName())
	})

	t.Run("HoldsRecords", func(t *testing.T) {
		s := open(testenv.UniqueName("r"))
		create(s)
		_, err := pool.Exec(ctx, `INSERT INTO `+s.TableName()+` (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome)
VALUES ('acme', 'k', 2, 'h', 7, now(), now() + interval '1 hour', now(), now(), 'done')`)
		require.NoError(t, err)
		err = s.EnsureSchema(ctx)
		require.ErrorIs(t, err, pgstore.ErrNotDistributed)
		assert.NotErrorIs(t, err, store.ErrUnavailable)
		stmt := fmt.Sprintf("SELECT create_distributed_table('%s', 'tenant')", s.TableName())
		require.Contains(t, err.Error(), stmt)
		_, err = pool.Exec(ctx, stmt)
		require.NoError(t, err)
		require.NoError(t, s.EnsureSchema(ctx))
		requireDistributed(t, pool, s.TableName())
		rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: "k"})
		require.NoError(t, err)
		assert.Equal(t, []byte("done"), rec.Outcome)
	})

	t.Run("DistributedByKey", func(t *testing.T) {
		s := open(testenv.UniqueName("r"))
		create(s)
		_, err := pool.Exec(ctx, "SELECT create_distributed_table($1, 'key')", s.TableName())
		require.NoError(t, err)
		err = s.EnsureSchema(ctx)
		require.ErrorIs(t, err, pgstore.ErrNotDistributed)
		assert.Contains(t, err.Error(), `distributed by "key"`)
	})

	t.Run("ReferenceTable", func(t *testing.T) {
		s := open(testenv.UniqueName("r"))
		create(s)
		_, err := pool.Exec(ctx, "SELECT create_reference_table($1)", s.TableName())
		require.NoError(t, err)
		err = s.EnsureSchema(ctx)
		require.ErrorIs(t, err, pgstore.ErrNotDistributed)
		assert.Contains(t, err.Error(), "a reference or local table of Citus")
	})
}

// NOTIFY on Citus: a statement on the record's table runs on the worker
// that holds its shard, and so does the pg_notify in it, while the store
// LISTENs on the coordinator: a store told it may notify there
// (Capabilities{Notify: true}) delivers no notification, and its waiters
// wake by polling alone. That is why DetectCapabilities answers without
// Notify on Citus.
func TestCitusNotifyDoesNotReachTheCoordinator(t *testing.T) {
	t.Parallel()
	pool, schema := citus(t)
	s := newCitusStore(t, pool, schema, pgstore.Options{
		Capabilities: &pgstore.Capabilities{Notify: true},
		PollInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
	})
	blocked := make(chan struct{}, 1)
	s.SetOnBlock(func(store.WaitParams) {
		select {
		case blocked <- struct{}{}:
		default:
		}
	})
	ctx := context.Background()
	const waits = 5
	var late time.Duration
	for i := range waits {
		key := fmt.Sprintf("k%d", i)
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: key, Holder: "h", Lease: time.Minute})
		require.NoError(t, err)
		for len(blocked) > 0 {
			<-blocked
		}
		done := make(chan time.Time, 1)
		go func() {
			_, err := s.Wait(ctx, store.WaitParams{Tenant: "acme", Key: key, Token: res.Record.Token})
			assert.NoError(t, err)
			done <- time.Now()
		}()
		<-blocked
		require.Eventually(t, s.Listening, 10*time.Second, time.Millisecond)
		require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: key, Token: res.Record.Token}))
		completed := time.Now()
		late += (<-done).Sub(completed)
	}
	assert.Zero(t, s.Delivered(), "a notification from a worker reached the coordinator's LISTEN")
	t.Logf("with Notify on Citus: %d notifications delivered; waiters woke %v after the completion on average (by polling every 200ms)",
		s.Delivered(), late/waits)
}

// A waiter on Citus wakes by polling: the portable mode's defaults (20 ms,
// backing off to 500 ms) bound how late.
func TestCitusWaitersPoll(t *testing.T) {
	t.Parallel()
	pool, schema := citus(t)
	s := newCitusStore(t, pool, schema, pgstore.Options{})
	ctx := context.Background()
	for _, hold := range []time.Duration{0, 100 * time.Millisecond} {
		key := "k" + hold.String()
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: key, Holder: "h", Lease: time.Minute})
		require.NoError(t, err)
		done := make(chan time.Time, 1)
		go func() {
			_, err := s.Wait(ctx, store.WaitParams{Tenant: "acme", Key: key, Token: res.Record.Token})
			assert.NoError(t, err)
			done <- time.Now()
		}()
		time.Sleep(hold)
		require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: key, Token: res.Record.Token}))
		completed := time.Now()
		late := (<-done).Sub(completed)
		assert.Less(t, late, pgstore.DefaultPollOnlyMaxInterval+time.Second, "hold %v", hold)
		t.Logf("hold %v: the waiter woke %v after the completion", hold, late)
	}
}

// The listings of what waits in a tenant read the partial index of the
// records that are not completed on the tenant's shard; the listings
// across tenants and the backlog count read it on every shard; none reads
// a shard sequentially.
func TestCitusListPlans(t *testing.T) {
	t.Parallel()
	pool, schema := citus(t)
	s := newCitusStore(t, pool, schema, pgstore.Options{})
	ctx := context.Background()
	loadListingTable(t, pool, s.TableName())

	waiting := []store.State{store.StateIndeterminate, store.StatePending}
	page, err := s.List(ctx, store.ListParams{Tenant: "busy", States: []store.State{store.StateIndeterminate}, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Records, 2)
	now := time.Now()
	for _, tc := range []struct {
		name  string
		p     store.ListParams
		tasks string
	}{
		{"in a tenant", store.ListParams{Tenant: "tenant-3", States: []store.State{store.StateIndeterminate}}, "Task Count: 1"},
		{"in a tenant, next page", store.ListParams{Tenant: "busy", States: []store.State{store.StateIndeterminate}, Cursor: page.Next, Limit: 2}, "Task Count: 1"},
		{"in a tenant, stale, oldest first", store.ListParams{Tenant: "busy", Stale: true, Order: store.OldestFirst}, "Task Count: 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql, args, err := s.ListSQL(tc.p, false, now)
			require.NoError(t, err)
			plan := explain(t, pool, "force_custom_plan", sql, args)
			require.Contains(t, plan, tc.tasks, plan)
			require.Contains(t, plan, s.ListIndexName(), plan)
			require.NotContains(t, plan, "Seq Scan", plan)
		})
	}
	var shards int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM citus_shards WHERE table_name = to_regclass($1)", s.TableName()).Scan(&shards))
	backlogSQL, backlogArgs := s.CountBacklogSQL(now)
	for _, tc := range []struct {
		name string
		sql  func() (string, []any, error)
	}{
		{"across tenants", func() (string, []any, error) {
			return s.ListSQL(store.ListParams{States: waiting, Stale: true}, true, now)
		}},
		{"backlog count", func() (string, []any, error) { return backlogSQL, backlogArgs, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql, args, err := tc.sql()
			require.NoError(t, err)
			plan := explain(t, pool, "force_custom_plan", sql, args)
			require.Contains(t, plan, fmt.Sprintf("Task Count: %d", shards), plan) // every shard
			require.Contains(t, plan, s.ListIndexName(), plan)
			require.NotContains(t, plan, "Seq Scan", plan)
		})
	}
	n, err := s.CountBacklog(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, n)

	// Sweep's statement on this table, some of its 120000 records expired:
	// Citus reads the batch first (a subplan: up to the limit from every
	// shard, through its expiry index, cut to the limit on the
	// coordinator), then sends it to every shard, which deletes its part,
	// again reading its expired rows through the expiry index: no shard is
	// read whole.
	_, err = pool.Exec(ctx, "UPDATE "+s.TableName()+" SET expires_at = now() - interval '1 hour' WHERE tenant = 'tenant-7' AND key LIKE 'key-1%' AND state = 2")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE "+s.TableName())
	require.NoError(t, err)
	plan := explain(t, pool, "force_custom_plan", s.Statements()["sweep"], []any{now, 100})
	require.Contains(t, plan, fmt.Sprintf("Task Count: %d", shards), plan)
	require.Contains(t, plan, "expires_at_idx", plan)
	require.NotContains(t, plan, "Seq Scan", plan)
	swept, err := s.Sweep(ctx, store.SweepParams{Limit: 100})
	require.NoError(t, err)
	assert.Equal(t, 100, swept)
}

// Sweep on Citus deletes a batch of expired records across every shard,
// never more than its limit, and leaves live records alone; Forget erases
// one tenant's records, on its shard alone.
func TestCitusSweepAndForget(t *testing.T) {
	t.Parallel()
	pool, schema := citus(t)
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	s := newCitusStore(t, pool, schema, pgstore.Options{Clock: clock, TTL: time.Minute})
	ctx := context.Background()
	const tenants, perTenant = 20, 10
	for i := range tenants {
		for k := range perTenant {
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: fmt.Sprintf("tenant-%d", i), Key: fmt.Sprintf("k%d", k), Holder: "h", Lease: time.Second})
			require.NoError(t, err)
			require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: res.Record.Tenant, Key: res.Record.Key, Token: res.Record.Token}))
		}
	}
	var shards int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT get_shard_id_for_distribution_column($1, tenant)) FROM `+s.TableName(),
		s.TableName()).Scan(&shards))
	require.Greater(t, shards, 2, "the tenants' records are on %d shards", shards)

	// Forget is one statement on the tenant's shard.
	plan := explain(t, pool, "force_custom_plan", s.Statements()["forget"], []any{"tenant-0"})
	require.Contains(t, plan, "Task Count: 1", plan)
	n, err := s.Forget(ctx, store.ForgetParams{Tenant: "tenant-0"})
	require.NoError(t, err)
	assert.Equal(t, perTenant, n)
	clock.Advance(2 * time.Minute)
	// A live record, claimed after the others expired.
	_, err = s.Claim(ctx, store.ClaimParams{Tenant: "tenant-1", Key: "live", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	const limit = 37
	swept := 0
	for {
		n, err := s.Sweep(ctx, store.SweepParams{Limit: limit})
		require.NoError(t, err)
		require.LessOrEqual(t, n, limit)
		swept += n
		if n < limit {
			break
		}
	}
	assert.Equal(t, (tenants-1)*perTenant, swept)
	_, err = s.Lookup(ctx, store.LookupParams{Tenant: "tenant-1", Key: "live"})
	require.NoError(t, err, "the sweep took a live record")
	var left int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+s.TableName()).Scan(&left))
	assert.Equal(t, 1, left)
}

// A statement Citus refuses is an error of the store's, never a silent
// success: an UPDATE whose CASE calls a STABLE function on a distributed
// table, as the default mode's completion does, is refused (0A000); the
// portable mode's completion computes the same instant with IMMUTABLE
// functions and runs.
func TestCitusRefusesTheDefaultModesCompletion(t *testing.T) {
	t.Parallel()
	pool, schema := citus(t)
	table := testenv.UniqueName("r")
	portable := newCitusStore(t, pool, schema, pgstore.Options{Table: table})
	all := pgstore.AllCapabilities()
	def, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: table, Capabilities: &all})
	require.NoError(t, err)
	t.Cleanup(def.Close)
	ctx := context.Background()
	for _, s := range []*pgstore.Store{def, portable} {
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "k" + fmt.Sprint(s == def), Holder: "h", Lease: time.Minute, Retention: time.Hour})
		require.NoError(t, err)
		err = s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: res.Record.Key, Token: res.Record.Token})
		if s == def {
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), "0A000"), "%v", err)
			continue
		}
		require.NoError(t, err)
		rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "acme", Key: res.Record.Key})
		require.NoError(t, err)
		assert.Equal(t, store.StateCompleted, rec.State)
		assert.WithinDuration(t, rec.UpdatedAt.Add(time.Hour), rec.ExpiresAt, 0, "the record's own retention, to the microsecond")
	}
}
