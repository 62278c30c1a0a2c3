// Package pgenv gives tests a PostgreSQL pool in a schema of its own (see
// package testenv for the environment). Only tests that talk to PostgreSQL
// import it, so a test binary of pgstore never links go-redis.
package pgenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/testenv"
)

// PostgresURLEnv names the variable holding the test PostgreSQL's URL.
const PostgresURLEnv = "IDEMPOTENCY_TEST_POSTGRES_URL"

// DefaultPostgresURL is used when PostgresURLEnv is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresMaxConns bounds each pool Postgres returns: suites run in
// parallel on one server, so pools stay small.
const PostgresMaxConns = 4

// PostgresURL returns the test server's URL: PostgresURLEnv, or
// DefaultPostgresURL.
func PostgresURL() string { return testenv.Getenv(PostgresURLEnv, DefaultPostgresURL) }

// Postgres returns a pool on the test server and the name of a schema
// created for this test alone (lower-case, unquoted-safe). The schema is
// dropped, with everything in it, and the pool closed when the test ends.
// The pool's search_path is not changed: qualify names with the schema.
// When the server does not answer, the test fails, or is skipped under
// IDEMPOTENCY_SKIP_MISSING_SERVICES=1 (see [testenv.Unreachable]).
func Postgres(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	pool := PostgresPool(t, PostgresMaxConns)
	schema := testenv.UniqueName("t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create test schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	return pool, schema
}

// PostgresPool returns a pool of at most maxConns connections on the test
// server, closed when the test ends, without a schema of its own. Use it for
// a second replica's pool beside [Postgres], or where a test manages its
// own schema.
func PostgresPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(PostgresURL())
	if err != nil {
		t.Fatalf("parse %s: %v", PostgresURLEnv, err)
	}
	cfg.MaxConns = maxConns
	cfg.MinConns = 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		testenv.Unreachable(t, "PostgreSQL", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		testenv.Unreachable(t, "PostgreSQL", err)
	}
	// Registered before the caller's own cleanups, so it runs after them.
	t.Cleanup(pool.Close)
	return pool
}
