package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// The store keeps its contract whatever query mode the deployment's pool
// runs in: a pooler in transaction mode (PgBouncer) often needs the
// simple protocol or unnamed statements instead of pgx's cached prepared
// ones. The claim sends two statements as one batch, and each must still
// run in one implicit transaction with a snapshot of its own.
func TestConformanceInEveryQueryMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec,
		pgx.QueryExecModeExec,
		pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			// A schema per mode: one DROP SCHEMA … CASCADE of every mode's
			// tables would need more locks than a transaction may take.
			_, schema := pgenv.Postgres(t)
			cfg, err := pgxpool.ParseConfig(pgenv.PostgresURL())
			require.NoError(t, err)
			cfg.MaxConns = pgenv.PostgresMaxConns
			cfg.ConnConfig.DefaultQueryExecMode = mode
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
				return newStore(t, pool, schema, pgstore.Options{
					TTL:             cfg.TTL,
					Clock:           cfg.Clock,
					PollInterval:    5 * time.Millisecond,
					MaxPollInterval: 20 * time.Millisecond,
				})
			})
		})
	}
}
