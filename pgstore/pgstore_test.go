package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tesserix/idempotency/internal/optdoc"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore returns a store on its own table in schema, with its table
// created and its listener stopped when the test ends.
func newStore(t testing.TB, pool *pgxpool.Pool, schema string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	opts.Schema = schema
	if opts.Table == "" {
		opts.Table = testenv.UniqueName("r")
	}
	s, err := pgstore.New(pool, opts)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.EnsureSchema(context.Background()))
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
		return newStore(t, pool, schema, pgstore.Options{
			TTL:             cfg.TTL,
			Clock:           cfg.Clock,
			PollInterval:    5 * time.Millisecond,
			MaxPollInterval: 20 * time.Millisecond,
		})
	})
}

func TestNewRefusesOptions(t *testing.T) {
	t.Parallel()
	pool := pgenv.PostgresPool(t, 1)
	cases := []struct {
		name  string
		opts  pgstore.Options
		field string
	}{
		{"schema injection", pgstore.Options{Schema: `x"; DROP TABLE y; --`}, "pgstore.Options.Schema"},
		{"table injection", pgstore.Options{Table: `t"; DROP TABLE y; --`}, "pgstore.Options.Table"},
		{"table with a dot", pgstore.Options{Table: "a.b"}, "pgstore.Options.Table"},
		{"schema starting with a digit", pgstore.Options{Schema: "1abc"}, "pgstore.Options.Schema"},
		{"table of 64 letters", pgstore.Options{Table: strings.Repeat("a", 64)}, "pgstore.Options.Table"},
		{"schema with a NUL", pgstore.Options{Schema: "a\x00b"}, "pgstore.Options.Schema"},
		{"non-ASCII table", pgstore.Options{Table: "tablé"}, "pgstore.Options.Table"},
		{"channel with a space", pgstore.Options{NotifyChannel: "a b"}, "pgstore.Options.NotifyChannel"},
		{"negative TTL", pgstore.Options{TTL: -time.Second}, "pgstore.Options.TTL"},
		{"negative poll", pgstore.Options{PollInterval: -time.Second}, "pgstore.Options.PollInterval"},
		{"max poll below poll", pgstore.Options{PollInterval: time.Second, MaxPollInterval: time.Millisecond}, "pgstore.Options.MaxPollInterval"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := pgstore.New(pool, c.opts)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, s)
			var inv *store.InvalidError
			require.ErrorAs(t, err, &inv)
			assert.Equal(t, c.field, inv.Field)
		})
	}
	t.Run("nil pool", func(t *testing.T) {
		t.Parallel()
		_, err := pgstore.New(nil, pgstore.Options{})
		require.ErrorIs(t, err, store.ErrInvalid)
	})
}

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	pool := pgenv.PostgresPool(t, 1)
	s, err := pgstore.New(pool, pgstore.Options{})
	require.NoError(t, err)
	defer s.Close()
	o := s.Options()
	assert.Equal(t, pgstore.DefaultSchema, o.Schema)
	assert.Equal(t, pgstore.DefaultTable, o.Table)
	assert.Equal(t, store.DefaultTTL, o.TTL)
	assert.Equal(t, pgstore.DefaultPollInterval, o.PollInterval)
	assert.Equal(t, pgstore.DefaultMaxPollInterval, o.MaxPollInterval)
	assert.NotEmpty(t, o.NotifyChannel)
	assert.NotNil(t, o.Clock)

	other, err := pgstore.New(pool, pgstore.Options{Table: "other"})
	require.NoError(t, err)
	defer other.Close()
	assert.NotEqual(t, o.NotifyChannel, other.Options().NotifyChannel, "stores on different tables share a channel")
}

func TestEnsureSchemaConcurrent(t *testing.T) {
	t.Parallel()
	pool, _ := pgenv.Postgres(t)
	// A schema that does not exist yet, so the replicas race on creating
	// the schema, the table and the index alike.
	schema := testenv.UniqueName("fresh")
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`)
		assert.NoError(t, err)
	})
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	defer s.Close()

	const replicas = 8
	errs := make(chan error, replicas)
	var start sync.WaitGroup
	start.Add(1)
	for range replicas {
		go func() {
			start.Wait()
			errs <- s.EnsureSchema(context.Background())
		}()
	}
	start.Done()
	for range replicas {
		assert.NoError(t, <-errs)
	}
	// And once more, against everything existing.
	require.NoError(t, s.EnsureSchema(context.Background()))

	ctx := context.Background()
	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, store.StatusAcquired, res.Status)
}

// TestLongNames uses the longest names allowed: the expiry index's name,
// derived from the table's, must stay within PostgreSQL's 63 bytes and
// distinct for two tables that share a long prefix.
func TestLongNames(t *testing.T) {
	t.Parallel()
	pool, _ := pgenv.Postgres(t)
	unique := testenv.UniqueName("")
	schema := "s" + strings.Repeat("x", 62-len(unique)) + unique
	require.Len(t, schema, 63)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`)
		assert.NoError(t, err)
	})
	ctx := context.Background()
	for _, table := range []string{strings.Repeat("t", 62) + "1", strings.Repeat("t", 62) + "2"} {
		s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: table})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.EnsureSchema(ctx))
		_, err = s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
		require.NoError(t, err)
	}
	var indexes int
	// The schema's indexes first, materialized: pg_indexes may describe an
	// index of another test's schema that is being dropped, and fail.
	require.NoError(t, pool.QueryRow(ctx, `WITH ix AS MATERIALIZED (
	SELECT i.indexrelid FROM pg_index i
	JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1)
SELECT count(*) FROM ix WHERE pg_get_indexdef(indexrelid) LIKE '%(expires_at)%'`, schema).Scan(&indexes))
	assert.Equal(t, 2, indexes, "each table has its own expiry index")
}

func TestMissingSchema(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: "never_created"})
	require.NoError(t, err)
	defer s.Close()
	missingSchema, err := pgstore.New(pool, pgstore.Options{Schema: testenv.UniqueName("absent")})
	require.NoError(t, err)
	defer missingSchema.Close()

	ctx := context.Background()
	for name, st := range map[string]*pgstore.Store{"missing table": s, "missing schema": missingSchema} {
		t.Run(name, func(t *testing.T) {
			_, err := st.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
			require.ErrorIs(t, err, pgstore.ErrNoSchema)
			assert.NotErrorIs(t, err, store.ErrUnavailable, "a missing table is not an outage")
			assert.Contains(t, err.Error(), "EnsureSchema")

			_, err = st.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
			require.ErrorIs(t, err, pgstore.ErrNoSchema)
			_, err = st.Sweep(ctx, store.SweepParams{})
			require.ErrorIs(t, err, pgstore.ErrNoSchema)
		})
	}
}

// A table that exists with another shape is named as such, not as an
// outage and not as a missing table.
func TestSchemaMismatch(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	ctx := context.Background()
	// The right columns, but no primary key for ON CONFLICT to use.
	_, err := pool.Exec(ctx, `CREATE TABLE "`+schema+`".misshapen (
		tenant text NOT NULL, key text NOT NULL, state smallint NOT NULL, holder text NOT NULL,
		token bigint NOT NULL, lease_until timestamptz NOT NULL, expires_at timestamptz NOT NULL,
		created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, outcome bytea, reason text NOT NULL DEFAULT '')`)
	require.NoError(t, err)
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: "misshapen"})
	require.NoError(t, err)
	defer s.Close()

	_, err = s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.ErrorIs(t, err, pgstore.ErrSchemaMismatch)
	assert.NotErrorIs(t, err, store.ErrUnavailable)
	assert.NotErrorIs(t, err, pgstore.ErrNoSchema)
}

func TestTenantStoredVerbatim(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	ctx := context.Background()
	cases := []struct{ name, tenant, key string }{
		{"single quotes", `o'brien`, `k'ey`},
		{"double quotes", `"acme"`, `"k"`},
		{"sql in the tenant", `x'); DROP TABLE y; --`, `'; DELETE FROM t; --`},
		{"backslashes", `a\b\\c`, `\x00`},
		{"unicode", "Zoë ☃", "ключ"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: c.tenant, Key: c.key, Holder: c.tenant, Lease: time.Minute})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: c.tenant, Key: c.key, Token: res.Record.Token, Outcome: []byte(c.tenant)}))
			rec, err := s.Lookup(ctx, store.LookupParams{Tenant: c.tenant, Key: c.key})
			require.NoError(t, err)
			assert.Equal(t, c.tenant, rec.Tenant)
			assert.Equal(t, c.key, rec.Key)
			assert.Equal(t, c.tenant, rec.Holder)
			assert.Equal(t, []byte(c.tenant), rec.Outcome)
			n, err := s.Forget(ctx, store.ForgetParams{Tenant: c.tenant})
			require.NoError(t, err)
			assert.Equal(t, 1, n)
		})
	}
}

func TestClosedPoolIsUnavailable(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	ctx := context.Background()
	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	token := res.Record.Token

	// A pool of its own, closed, over the same table.
	closed := pgenv.PostgresPool(t, 1)
	cs, err := pgstore.New(closed, s.Options())
	require.NoError(t, err)
	defer cs.Close()
	closed.Close()

	for name, call := range operations(cs, "t", "k", token) {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, call(ctx), store.ErrUnavailable)
		})
	}
}

func TestContextErrorsAreNotUnavailable(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, call := range operations(s, "t", "k", 1) {
		t.Run(name, func(t *testing.T) {
			err := call(ctx)
			require.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, store.ErrUnavailable)
		})
	}
}

// operations returns one call of each store method on key k.
func operations(s store.Store, tenant, key string, token int64) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"Claim": func(ctx context.Context) error {
			_, err := s.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: "h", Lease: time.Minute})
			return err
		},
		"Renew": func(ctx context.Context) error {
			_, err := s.Renew(ctx, store.RenewParams{Tenant: tenant, Key: key, Token: token, Lease: time.Minute})
			return err
		},
		"Complete": func(ctx context.Context) error {
			return s.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: key, Token: token, Outcome: []byte("x")})
		},
		"Release": func(ctx context.Context) error {
			return s.Release(ctx, store.ReleaseParams{Tenant: tenant, Key: key, Token: token})
		},
		"MarkIndeterminate": func(ctx context.Context) error {
			return s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: key, Token: token, Reason: "r"})
		},
		"Lookup": func(ctx context.Context) error {
			_, err := s.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: key})
			return err
		},
		"Wait": func(ctx context.Context) error {
			_, err := s.Wait(ctx, store.WaitParams{Tenant: tenant, Key: key, Token: token})
			return err
		},
		"Resolve": func(ctx context.Context) error {
			return s.Resolve(ctx, store.ResolveParams{Tenant: tenant, Key: key, Decision: store.ActionFree})
		},
		"Forget": func(ctx context.Context) error {
			_, err := s.Forget(ctx, store.ForgetParams{Tenant: tenant})
			return err
		},
		"Sweep": func(ctx context.Context) error {
			_, err := s.Sweep(ctx, store.SweepParams{})
			return err
		},
	}
}

// TestNotificationsWakeWaiters proves the LISTEN/NOTIFY path on its own:
// the waiters' polling interval is an hour, and the change is made only once
// the waiter is blocked on a listener that is already listening, so only a
// notification can wake it before the test's deadline. Changes come from a
// second replica on the same table.
func TestNotificationsWakeWaiters(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: testenv.UniqueName("r"), PollInterval: time.Hour, MaxPollInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	blocked := make(chan store.WaitParams, 1)
	s.SetOnBlock(func(p store.WaitParams) { blocked <- p })
	require.NoError(t, s.EnsureSchema(context.Background()))
	other, err := pgstore.New(pgenv.PostgresPool(t, 2), s.Options())
	require.NoError(t, err)
	defer other.Close()

	// The first Wait starts the listener; this one returns at once.
	_, err = s.Wait(context.Background(), store.WaitParams{Tenant: "warm", Key: "up", Token: 1})
	require.NoError(t, err)
	require.Eventually(t, s.Listening, 10*time.Second, 5*time.Millisecond, "the listener never listened")

	cases := []struct {
		name   string
		tenant string
		change func(ctx context.Context, tenant, key string, token int64) error
		want   store.Status
	}{
		{"complete", "t", func(ctx context.Context, tenant, key string, token int64) error {
			return other.Complete(ctx, store.CompleteParams{Tenant: tenant, Key: key, Token: token, Outcome: []byte("ok")})
		}, store.StatusCompleted},
		{"release", "t", func(ctx context.Context, tenant, key string, token int64) error {
			return other.Release(ctx, store.ReleaseParams{Tenant: tenant, Key: key, Token: token})
		}, store.StatusFree},
		{"mark indeterminate", "t", func(ctx context.Context, tenant, key string, token int64) error {
			return other.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: tenant, Key: key, Token: token})
		}, store.StatusIndeterminate},
		{"supersede", "t", func(ctx context.Context, tenant, key string, token int64) error {
			_, err := other.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: key, Holder: "next", Lease: time.Minute, Supersede: token})
			return err
		}, store.StatusHeld},
		// The server computes forget's payloads itself; this case proves
		// its digest matches the Go one, quotes and non-ASCII included.
		{"forget", "tenant 'with' \"quotes\" ☃", func(ctx context.Context, tenant, key string, token int64) error {
			_, err := other.Forget(ctx, store.ForgetParams{Tenant: tenant})
			return err
		}, store.StatusFree},
	}
	for i, c := range cases {
		// Sequential: the cases share the store's blocked hook.
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			key := "key-" + strconv.Itoa(i)
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: c.tenant, Key: key, Holder: "first", Lease: time.Hour})
			require.NoError(t, err)
			require.Equal(t, store.StatusAcquired, res.Status)
			params := store.WaitParams{Tenant: c.tenant, Key: key, Token: res.Record.Token}

			done := make(chan struct{})
			var got store.Result
			var waitErr error
			go func() {
				defer close(done)
				got, waitErr = s.Wait(ctx, params)
			}()
			select {
			case p := <-blocked:
				require.Equal(t, params, p)
			case <-ctx.Done():
				t.Fatal("the waiter never blocked")
			}
			require.True(t, s.Listening(), "the listener dropped its connection")
			delivered := s.Delivered()
			require.NoError(t, c.change(ctx, c.tenant, key, res.Record.Token))
			<-done
			require.NoError(t, waitErr, "only a notification could have woken the waiter")
			assert.Equal(t, c.want, got.Status)
			assert.Greater(t, s.Delivered(), delivered, "no notification reached the waiter")
		})
	}
}

// TestReplicasRace runs storetest's replicas race on two stores, each on
// its own pool, over one table.
func TestReplicasRace(t *testing.T) {
	t.Parallel()
	storetest.Replicas(t, func(t *testing.T) (store.Store, store.Store) {
		pool, schema := pgenv.Postgres(t)
		a := newStore(t, pool, schema, pgstore.Options{PollInterval: 50 * time.Millisecond})
		b, err := pgstore.New(pgenv.PostgresPool(t, pgenv.PostgresMaxConns), a.Options())
		require.NoError(t, err)
		t.Cleanup(b.Close)
		return a, b
	})
}

func TestSweepBatches(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	clock := storetest.NewClock(time.Now())
	s := newStore(t, pool, schema, pgstore.Options{Clock: clock, TTL: time.Hour})
	ctx := context.Background()
	for i := range 25 {
		_, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: strconv.Itoa(i), Holder: "h", Lease: time.Minute})
		require.NoError(t, err)
	}
	n, err := s.Sweep(ctx, store.SweepParams{Limit: 10})
	require.NoError(t, err)
	require.Zero(t, n, "nothing has expired yet")

	clock.Advance(time.Hour)
	var got []int
	for {
		n, err := s.Sweep(ctx, store.SweepParams{Limit: 10})
		require.NoError(t, err)
		got = append(got, n)
		if n < 10 {
			break
		}
	}
	assert.Equal(t, []int{10, 10, 5}, got)
}

func TestErrorsNameTheirCause(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	ctx := context.Background()
	err := s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "gone", Token: 7})
	require.ErrorIs(t, err, store.ErrNotHolder)
	assert.Contains(t, err.Error(), "no live record")

	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	err = s.Release(ctx, store.ReleaseParams{Tenant: "t", Key: "k", Token: res.Record.Token + 1})
	require.ErrorIs(t, err, store.ErrNotHolder)
	assert.Contains(t, err.Error(), strconv.FormatInt(res.Record.Token, 10))
	assert.False(t, errors.Is(err, store.ErrUnavailable))
}

// Leases and expiries are judged by PostgreSQL's clock, not the workers'.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	storetest.RunClockSkew(t, func(t *testing.T, local store.Clock, ttl time.Duration) store.Store {
		s, err := pgstore.NewWithLocalClock(pool, pgstore.Options{Schema: schema, TTL: ttl}, local)
		require.NoError(t, err)
		require.NoError(t, s.EnsureSchema(context.Background()))
		t.Cleanup(s.Close)
		return s
	})
}

// Every default Options states is the value New applies.
func TestOptionsDocStatesTheDefaults(t *testing.T) {
	n := optdoc.Check(t, "options.go", map[string]any{
		"DefaultSchema": pgstore.DefaultSchema, "DefaultTable": pgstore.DefaultTable, "store.DefaultTTL": store.DefaultTTL,
		"DefaultPollInterval": pgstore.DefaultPollInterval, "DefaultMaxPollInterval": pgstore.DefaultMaxPollInterval,
		"DefaultPollOnlyInterval": pgstore.DefaultPollOnlyInterval, "DefaultPollOnlyMaxInterval": pgstore.DefaultPollOnlyMaxInterval,
	})
	assert.Equal(t, 7, n)
}

// TestConformanceBatched runs the contract through the batch statements:
// every Claim and Complete is sent as a batch, a lone call as a batch of
// one, so each case's answers are the batch's.
func TestConformanceBatched(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
		s := newStore(t, pool, schema, pgstore.Options{
			TTL:             cfg.TTL,
			Clock:           cfg.Clock,
			PollInterval:    5 * time.Millisecond,
			MaxPollInterval: 20 * time.Millisecond,
			Batch:           true,
		})
		s.AlwaysBatch()
		s.SetOnBatch(func(claims bool, size int) { batched[btoi(claims)].Add(int64(size)) })
		return s
	})
	t.Cleanup(func() {
		if !t.Failed() && (batched[0].Load() == 0 || batched[1].Load() == 0) {
			t.Errorf("batched %d claims and %d completions: the suite must go through both", batched[1].Load(), batched[0].Load())
		}
	})
}

// batched counts the completions ([0]) and claims ([1]) that
// TestConformanceBatched sent through batches.
var batched [2]atomic.Int64

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
