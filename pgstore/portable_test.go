package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// TestConformancePortable runs the whole store contract with every
// capability a distributed engine may lack switched off (Options.Portable),
// against the PostgreSQL here: no NOTIFY, no xmax or ctid, no advisory lock.
func TestConformancePortable(t *testing.T) {
	t.Parallel()
	_, schema := pgenv.Postgres(t) // a schema of its own
	pool := pgenv.PostgresPool(t, pgenv.PostgresMaxConns)
	storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
		return newStore(t, pool, schema, pgstore.Options{
			TTL:             cfg.TTL,
			Clock:           cfg.Clock,
			PollInterval:    5 * time.Millisecond,
			MaxPollInterval: 20 * time.Millisecond,
			Portable:        true,
		})
	})
}

// TestPortableUsesNoEngineSpecifics: no statement of a portable store
// names NOTIFY, a system column or an advisory lock, and its Wait never
// opens a LISTEN connection, yet wakes when the claim it waits on settles.
func TestPortableUsesNoEngineSpecifics(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{Portable: true, PollInterval: 5 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond})
	for _, sql := range s.AllSQL() {
		for _, banned := range []string{"pg_notify", "xmax", "ctid", "advisory"} {
			assert.NotContains(t, strings.ToLower(sql), banned, sql)
		}
	}
	def := newStore(t, pool, schema, pgstore.Options{})
	joined := strings.Join(def.AllSQL(), "\n")
	for _, used := range []string{"pg_notify", "xmax", "ctid"} {
		assert.Contains(t, joined, used, "the default mode still uses %s: the check above looks at what it should", used)
	}

	ctx := context.Background()
	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "k", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	var wg sync.WaitGroup
	wg.Add(1)
	var got store.Result
	go func() {
		defer wg.Done()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, err = s.Wait(wctx, store.WaitParams{Tenant: "acme", Key: "k", Token: res.Record.Token})
	}()
	require.Eventually(t, func() bool { return s.Waiters("acme", "k") == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "acme", Key: "k", Token: res.Record.Token, Outcome: []byte("12A")}))
	wg.Wait()
	require.NoError(t, err)
	assert.Equal(t, store.StatusCompleted, got.Status, "the waiter woke by polling")
	assert.False(t, s.ListenerStarted(), "no LISTEN connection was opened")
	assert.Zero(t, s.Delivered(), "no notification was delivered")
}

// TestPortableEnsureSchemaConcurrently: replicas creating the schema at
// once, with no advisory lock to order them, all succeed.
func TestPortableEnsureSchemaConcurrently(t *testing.T) {
	t.Parallel()
	pool, _ := pgenv.Postgres(t)
	schema := testenv.UniqueName("s")
	table := testenv.UniqueName("r")
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: table, Portable: true})
			if err == nil {
				defer s.Close()
				err = s.EnsureSchema(context.Background())
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	for i, err := range errs {
		assert.NoError(t, err, "replica %d", i)
	}
}

func TestDetectPortable(t *testing.T) {
	t.Parallel()
	pool := pgenv.PostgresPool(t, 1)
	need, engine, err := pgstore.DetectPortable(context.Background(), pool)
	require.NoError(t, err)
	assert.False(t, need, "PostgreSQL needs no portable mode (%s)", engine)
	for version, want := range map[string]string{
		"CockroachDB CCL v24.3.1 (x86_64-pc-linux-gnu, built 2024/12/12 00:00:00, go1.22.8)":                          "CockroachDB",
		"PostgreSQL 11.2-YB-2.25.0.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 17.0.6, 64-bit":             "YugabyteDB",
		"PostgreSQL 16.4 (Debian 16.4-1.pgdg120+2) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0": "",
	} {
		assert.Equal(t, want, pgstore.EngineOf(version), version)
	}
}
