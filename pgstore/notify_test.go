package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// notifications counts what arrives on channel until it is quiet for a
// moment.
func notifications(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			return n
		}
		n++
	}
}

// A settlement nobody waits for announces nothing (a NOTIFY serialises
// commits database-wide); one somebody waits for is announced, and wakes
// the waiter.
func TestNotifyOnlyWhenWatched(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgenv.PostgresURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.Options().NotifyChannel}.Sanitize())
	require.NoError(t, err)

	for _, settle := range []func(key string, token int64) error{
		func(key string, token int64) error {
			return s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: key, Token: token, Outcome: []byte("x")})
		},
		func(key string, token int64) error {
			return s.Release(ctx, store.ReleaseParams{Tenant: "t", Key: key, Token: token})
		},
		func(key string, token int64) error {
			return s.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: "t", Key: key, Token: token, Reason: "r"})
		},
	} {
		key := testenv.UniqueName("unwatched")
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: "h", Lease: time.Minute})
		require.NoError(t, err)
		require.NoError(t, settle(key, res.Record.Token))
	}
	assert.Zero(t, notifications(t, conn), "nobody waited: nothing announced")

	key := testenv.UniqueName("watched")
	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	blocked := make(chan struct{}, 1)
	s.SetOnBlock(func(store.WaitParams) {
		select {
		case blocked <- struct{}{}:
		default:
		}
	})
	done := make(chan store.Result, 1)
	go func() {
		r, err := s.Wait(ctx, store.WaitParams{Tenant: "t", Key: key, Token: res.Record.Token})
		assert.NoError(t, err)
		done <- r
	}()
	<-blocked
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: key, Token: res.Record.Token, Outcome: []byte("x")}))
	select {
	case r := <-done:
		assert.Equal(t, store.StatusCompleted, r.Status)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	assert.Equal(t, 1, notifications(t, conn), "the watched record's settlement is announced")
}

// A table made before the watched column existed is brought up to date by
// EnsureSchema, and its records keep working.
func TestEnsureSchemaAddsWatched(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	ctx := context.Background()
	table := pgx.Identifier{schema, "old_records"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (
	tenant text NOT NULL, key text NOT NULL, state smallint NOT NULL CHECK (state IN (1, 2, 3)),
	holder text NOT NULL, token bigint NOT NULL, lease_until timestamptz NOT NULL,
	expires_at timestamptz NOT NULL, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
	outcome bytea, reason text NOT NULL DEFAULT '', PRIMARY KEY (tenant, key))`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO `+table+` VALUES ('t', 'old', 2, 'h', 7, now(), now() + interval '1 hour', now(), now(), 'kept', '')`)
	require.NoError(t, err)

	s := newStore(t, pool, schema, pgstore.Options{Table: "old_records"})
	require.NoError(t, s.EnsureSchema(ctx), "twice is fine")
	rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "old"})
	require.NoError(t, err)
	assert.Equal(t, "kept", string(rec.Outcome), "an old record reads as before")
	res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "new", Holder: "h", Lease: time.Minute})
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "new", Token: res.Record.Token, Outcome: []byte("y")}))
}
