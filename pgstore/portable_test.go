package pgstore_test

import (
	"context"
	"strconv"
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
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// portable is the portable mode: every capability off.
func portable() *pgstore.Capabilities { return &pgstore.Capabilities{} }

// The whole store contract holds in the portable mode, on PostgreSQL with
// every capability switched off: no xmax, no ctid, no NOTIFY (waiters
// poll), no advisory locks. Each suite runs in a schema of its own.
func TestConformancePortable(t *testing.T) {
	t.Parallel()
	opts := func(cfg storetest.Config) pgstore.Options {
		return pgstore.Options{
			TTL: cfg.TTL, Clock: cfg.Clock, Capabilities: portable(),
			PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond,
		}
	}
	t.Run("Store", func(t *testing.T) {
		t.Parallel()
		pool, schema := pgenv.Postgres(t)
		storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
			return newStore(t, pool, schema, opts(cfg))
		})
	})
	t.Run("Transactor", func(t *testing.T) {
		t.Parallel()
		pool, schema := pgenv.Postgres(t)
		l := newLedger(t, pool, schema)
		storetest.RunTransactor(t, func(t *testing.T, cfg storetest.Config) storetest.Transactional {
			return storetest.Transactional{Store: newStore(t, pool, schema, opts(cfg)), Write: l.write, Effects: l.effects}
		})
	})
	t.Run("ClockSkew", func(t *testing.T) {
		t.Parallel()
		pool, schema := pgenv.Postgres(t)
		storetest.RunClockSkew(t, func(t *testing.T, local store.Clock, ttl time.Duration) store.Store {
			s, err := pgstore.NewWithLocalClock(pool, pgstore.Options{Schema: schema, TTL: ttl, Capabilities: portable()}, local)
			require.NoError(t, err)
			require.NoError(t, s.EnsureSchema(context.Background()))
			t.Cleanup(s.Close)
			return s
		})
	})
	// Notifications where the engine has them, beside the portable claim
	// and sweep: a replaced record's waiters are woken by the announcement
	// sent after the upsert.
	t.Run("NotifyOnly", func(t *testing.T) {
		t.Parallel()
		pool, schema := pgenv.Postgres(t)
		storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
			o := opts(cfg)
			o.Capabilities = &pgstore.Capabilities{Notify: true}
			return newStore(t, pool, schema, o)
		})
	})
}

// Each capability switched off takes its feature out of every statement
// the store sends; all of them on is exactly the default's SQL.
func TestCapabilitiesStatements(t *testing.T) {
	t.Parallel()
	pool := pgenv.PostgresPool(t, 1)
	build := func(caps *pgstore.Capabilities) map[string]string {
		s, err := pgstore.New(pool, pgstore.Options{Schema: "s", Table: "t", Capabilities: caps})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s.Statements()
	}
	all := pgstore.AllCapabilities()
	assert.Equal(t, build(nil), build(&all), "every capability on is the default")
	for _, c := range []struct {
		name string
		off  func(*pgstore.Capabilities)
		word string
	}{
		{"xmax", func(c *pgstore.Capabilities) { c.Xmax = false }, "xmax"},
		{"ctid", func(c *pgstore.Capabilities) { c.Ctid = false }, "ctid"},
		{"notify", func(c *pgstore.Capabilities) { c.Notify = false }, "notify"},
	} {
		caps := pgstore.AllCapabilities()
		c.off(&caps)
		assert.True(t, caps.Portable())
		for name, sql := range build(&caps) {
			assert.NotContains(t, strings.ToLower(sql), c.word, "%s: %s", c.name, name)
		}
		if c.name != "ctid" {
			assert.Empty(t, build(&caps)["claim"], "%s: the claim statement reads xmax and notifies", c.name)
		}
	}
	for name, sql := range build(portable()) {
		for _, word := range []string{"xmax", "ctid", "notify", "advisory"} {
			assert.NotContains(t, strings.ToLower(sql), word, name)
		}
	}
	assert.False(t, pgstore.AllCapabilities().Portable())
	assert.Equal(t, "xmax,ctid,notify,advisory-locks", pgstore.AllCapabilities().String())
	assert.Equal(t, "none", pgstore.Capabilities{}.String())
}

// Without NOTIFY a waiter still wakes when the holder completes, by
// polling: no connection listens, and nothing is announced.
func TestPortableWaitWakesByPolling(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{Capabilities: portable()})
	assert.Equal(t, pgstore.DefaultPollOnlyInterval, s.Options().PollInterval)
	assert.Equal(t, pgstore.DefaultPollOnlyMaxInterval, s.Options().MaxPollInterval)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgenv.PostgresURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.Options().NotifyChannel}.Sanitize())
	require.NoError(t, err)

	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	blocked := make(chan struct{}, 8)
	s.SetOnBlock(func(store.WaitParams) { blocked <- struct{}{} })
	woke := make(chan store.Result, 1)
	go func() {
		got, err := s.Wait(ctx, store.WaitParams{Tenant: "t", Key: "k", Token: res.Record.Token})
		assert.NoError(t, err)
		woke <- got
	}()
	<-blocked // the waiter read the record pending and sleeps
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "k", Token: res.Record.Token, Outcome: []byte("x")}))
	select {
	case got := <-woke:
		assert.Equal(t, store.StatusCompleted, got.Status)
		assert.Equal(t, []byte("x"), got.Record.Outcome)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never woke")
	}
	assert.False(t, s.Listening(), "a store without NOTIFY listened")
	assert.Zero(t, s.Delivered())
	assert.Zero(t, notifications(t, conn), "a store without NOTIFY announced")
}

// failFirst makes the first n inserts and updates of the store's table
// fail with SQLSTATE code, raised by the server; a sequence counts them
// (nextval is not rolled back with the failing statement).
func failFirst(t *testing.T, pool *pgxpool.Pool, s *pgstore.Store, code string, n int) {
	t.Helper()
	ctx := context.Background()
	seq := pgx.Identifier{s.Options().Schema, testenv.UniqueName("fails")}.Sanitize()
	fn := pgx.Identifier{s.Options().Schema, testenv.UniqueName("fail")}.Sanitize()
	for _, ddl := range []string{
		"CREATE SEQUENCE " + seq,
		"CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN " +
			"IF nextval('" + strings.ReplaceAll(seq, "'", "''") + "') <= " + strconv.Itoa(n) +
			" THEN RAISE EXCEPTION 'injected' USING ERRCODE = '" + code + "'; END IF; RETURN NEW; END $f$",
		"CREATE TRIGGER " + pgx.Identifier{testenv.UniqueName("fail")}.Sanitize() + " BEFORE INSERT OR UPDATE ON " + s.TableName() + " FOR EACH ROW EXECUTE FUNCTION " + fn + "()",
	} {
		_, err := pool.Exec(ctx, ddl)
		require.NoError(t, err)
	}
}

// In the portable mode a serialization failure (40001) is retried as a
// whole: the claim's batch and a completion run again until they land.
func TestPortableRetriesSerializationFailures(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{Capabilities: portable()})
	var retries atomic.Int64
	s.SetOnRetry(func(int) { retries.Add(1) })
	failFirst(t, pool, s, "40001", 2)
	ctx := context.Background()
	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, store.StatusAcquired, res.Status)
	assert.EqualValues(t, 2, retries.Load(), "the claim's batch ran again after each failure")
	failFirst(t, pool, s, "40P01", 2) // a second trigger: two more failures, of the completion
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "k", Token: res.Record.Token, Outcome: []byte("x")}))
	rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
}

// A transactional body's transaction that the database refuses for a
// serialization failure cannot be run again by the store (the body is the
// application's): its commit fails with an error matching
// ErrTransactionConflict, nothing lands, and the claim stands pending, so
// a new transaction for it commits.
func TestTransactionConflictIsTyped(t *testing.T) {
	t.Parallel()
	for name, caps := range map[string]*pgstore.Capabilities{"default": nil, "portable": portable()} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool, schema := pgenv.Postgres(t)
			l := newLedger(t, pool, schema)
			s := newStore(t, pool, schema, pgstore.Options{Capabilities: caps})
			ctx := context.Background()
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
			require.NoError(t, err)
			failFirst(t, pool, s, "40001", 1) // the fenced completion's update fails once

			txn, err := s.BeginTransaction(ctx, store.TransactionParams{Tenant: "t", Key: "k", Token: res.Record.Token})
			require.NoError(t, err)
			require.NoError(t, l.write(txn.Context(ctx), "first"))
			err = txn.Commit(ctx, []byte("x"))
			require.ErrorIs(t, err, pgstore.ErrTransactionConflict)
			assert.Contains(t, err.Error(), "did not commit")
			assert.NotErrorIs(t, err, store.ErrNotHolder)
			assert.Zero(t, l.effects(t, "first"), "a refused transaction landed its write")
			rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
			require.NoError(t, err)
			assert.Equal(t, store.StatePending, rec.State)
			assert.Equal(t, res.Record.Token, rec.Token)

			txn, err = s.BeginTransaction(ctx, store.TransactionParams{Tenant: "t", Key: "k", Token: res.Record.Token})
			require.NoError(t, err)
			require.NoError(t, l.write(txn.Context(ctx), "second"))
			require.NoError(t, txn.Commit(ctx, []byte("x")))
			assert.Equal(t, 1, l.effects(t, "second"))
		})
	}
}

// Without advisory locks, replicas racing to create a fresh schema all
// succeed: the losers of a race on the catalogs run their transaction
// again.
func TestPortableEnsureSchemaConcurrent(t *testing.T) {
	t.Parallel()
	pool, _ := pgenv.Postgres(t)
	schema := testenv.UniqueName("fresh")
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`)
		assert.NoError(t, err)
	})
	const replicas = 8
	stores := make([]*pgstore.Store, replicas)
	for i := range stores {
		s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Capabilities: portable()})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		stores[i] = s
	}
	errs := make([]error, replicas)
	var start, done sync.WaitGroup
	start.Add(1)
	for i, s := range stores {
		done.Go(func() {
			start.Wait()
			errs[i] = s.EnsureSchema(context.Background())
		})
	}
	start.Done()
	done.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	res, err := stores[0].Claim(context.Background(), store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, store.StatusAcquired, res.Status)
}

// The PostgreSQL here is PostgreSQL: every capability.
func TestDetectCapabilities(t *testing.T) {
	t.Parallel()
	pool := pgenv.PostgresPool(t, 1)
	engine, caps, err := pgstore.DetectCapabilities(context.Background(), pool)
	require.NoError(t, err)
	assert.Equal(t, pgstore.EnginePostgreSQL, engine)
	assert.Equal(t, pgstore.AllCapabilities(), caps)
}

// The portable mode keeps the contract where every transaction is
// SERIALIZABLE, as on CockroachDB: the pool's sessions default to it, so
// racing claims end in real serialization failures (40001), which the
// store runs again as whole transactions. (Transactional bodies begin READ
// COMMITTED explicitly, and are not run here.)
func TestConformancePortableSerializable(t *testing.T) {
	t.Parallel()
	_, schema := pgenv.Postgres(t)
	cfg, err := pgxpool.ParseConfig(pgenv.PostgresURL())
	require.NoError(t, err)
	cfg.MaxConns = pgenv.PostgresMaxConns
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var iso string
	require.NoError(t, pool.QueryRow(context.Background(), "SHOW transaction_isolation").Scan(&iso))
	require.Equal(t, "serializable", iso)
	var retries atomic.Int64
	t.Cleanup(func() { t.Logf("claims run again: %d", retries.Load()) })
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
		s := newStore(t, pool, schema, pgstore.Options{
			TTL: cfg.TTL, Clock: cfg.Clock, Capabilities: portable(),
			PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond,
		})
		s.SetOnRetry(func(int) { retries.Add(1) })
		return s
	})
}

// The commit guard in the portable mode, on PostgreSQL itself: the
// approval of a transactional commit is a statement of its own, sent before
// the fenced completion (see TestCitusTransactionGuard for the same cases
// on Citus).
func TestPortableTransactionGuard(t *testing.T) {
	t.Parallel()
	guardCases(t, func(t *testing.T, dropGuard bool) txSetup {
		pool, schema := pgenv.Postgres(t)
		table := testenv.UniqueName("r")
		s := newStore(t, pool, schema, pgstore.Options{Table: table, Capabilities: portable()})
		if dropGuard {
			_, err := pool.Exec(context.Background(), "DROP TABLE "+pgx.Identifier{schema, table + "_txguard"}.Sanitize())
			require.NoError(t, err)
		}
		return txSetup{s: s, l: newLedger(t, pool, schema)}
	})
}

// The portable mode computes the end of a record's own retention window
// with IMMUTABLE functions (as Citus requires), the default mode by adding
// an interval to a timestamptz: the same instant, to the microsecond,
// whatever the session's time zone and across a daylight-saving change.
func TestPortableRetentionWindowIsTheDefaults(t *testing.T) {
	t.Parallel()
	_, schema := pgenv.Postgres(t)
	cfg, err := pgxpool.ParseConfig(pgenv.PostgresURL())
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["timezone"] = "America/New_York"
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// An hour before clocks went forward in New York (2026-03-08 07:00 UTC).
	clock := storetest.NewClock(time.Date(2026, 3, 8, 6, 0, 0, 123456000, time.UTC))
	ctx := context.Background()
	for _, caps := range []*pgstore.Capabilities{nil, portable()} {
		s := newStore(t, pool, schema, pgstore.Options{Clock: clock, Capabilities: caps})
		for i, retention := range []time.Duration{time.Hour, 90*24*time.Hour + 17*time.Microsecond} {
			key := "k" + strconv.Itoa(i)
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: "h", Lease: time.Minute, Retention: retention})
			require.NoError(t, err)
			_, err = s.Renew(ctx, store.RenewParams{Tenant: "t", Key: key, Token: res.Record.Token, Lease: time.Minute})
			require.NoError(t, err)
			rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: key})
			require.NoError(t, err)
			assert.Equal(t, retention, rec.ExpiresAt.Sub(rec.UpdatedAt), "renewed, %s", s.Options().Capabilities)
			require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: key, Token: res.Record.Token}))
			rec, err = s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: key})
			require.NoError(t, err)
			assert.Equal(t, retention, rec.ExpiresAt.Sub(rec.UpdatedAt), "completed, %s", s.Options().Capabilities)
		}
	}
}
