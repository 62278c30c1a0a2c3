package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// A duplicate that arrives while the first claim of its key is committing
// learns that claim in its first round trip. Its insert waits for the
// commit; its read, a statement of its own, then sees the row. When both
// were one statement, the read used the snapshot taken before the wait,
// found nothing, and Claim slept 1–2 ms and ran again: under concurrency
// nearly every duplicate did, which cost pgstore a third of its
// throughput (issue 11).
func TestClaimBehindACommittingClaimDoesNotRetry(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{})
	var retries atomic.Int32
	s.SetOnRetry(func(int) { retries.Add(1) })
	ctx := context.Background()

	// The first claim, held open: its row is inserted, not yet committed.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO `+s.TableName()+` (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at)
VALUES ('acme', 'seat-12A', 1, 'first', 42, now() + interval '1 minute', now() + interval '1 hour', now(), now())`)
	require.NoError(t, err)

	type answer struct {
		res store.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "acme", Key: "seat-12A", Holder: "second", Lease: time.Minute})
		done <- answer{res, err}
	}()
	// The duplicate's insert waits for the first claim's transaction.
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO%' AND position($1 in query) > 0`, s.TableName()).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, 2*time.Millisecond, "the duplicate's claim never waited on the first claim's row")
	require.NoError(t, tx.Commit(ctx))

	select {
	case a := <-done:
		require.NoError(t, a.err)
		assert.Equal(t, store.StatusHeld, a.res.Status)
		assert.Equal(t, int64(42), a.res.Record.Token, "the duplicate sees the first claim")
		assert.Equal(t, "first", a.res.Record.Holder)
	case <-time.After(10 * time.Second):
		t.Fatal("the duplicate's claim did not return")
	}
	assert.Zero(t, retries.Load(), "the duplicate's claim ran again instead of reading the committed claim")
}
