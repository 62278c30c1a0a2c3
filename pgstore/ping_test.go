package pgstore_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// Ping answers for a reachable server, and names the address of one that
// does not answer.
func TestPing(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	require.NoError(t, newStore(t, pool, schema, pgstore.Options{}).Ping(context.Background()))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cfg, err := pgxpool.ParseConfig("postgres://postgres@" + addr + "/test?connect_timeout=1")
	require.NoError(t, err)
	gone, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(gone.Close)
	s, err := pgstore.New(gone, pgstore.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = s.Ping(ctx)
	require.ErrorIs(t, err, store.ErrUnavailable)
	assert.Contains(t, err.Error(), "PostgreSQL at "+addr+" does not answer")
}
