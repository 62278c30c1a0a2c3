package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// TestBatchedClaimsWinOnce races pairs of callers on each key through
// batches: many claims share a statement, the two claims of a key often the
// same one, and every key is still won exactly once, its loser answered
// with the winner's claim or outcome. Every call goes through the batch
// statements (AlwaysBatch): whether a busy pool would have batched them
// depends on the machine's load, which a test must not.
func TestBatchedClaimsWinOnce(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{Batch: true})
	s.AlwaysBatch()
	var (
		batches, largest atomic.Int64
		mu               sync.Mutex
	)
	s.SetOnBatch(func(claims bool, size int) {
		if claims {
			batches.Add(1)
			mu.Lock()
			largest.Store(max(largest.Load(), int64(size)))
			mu.Unlock()
		}
	})
	const keys, callers = 400, 32
	ctx := context.Background()
	var (
		next  atomic.Int64
		wins  = make([]atomic.Int64, keys)
		toks  = make([]atomic.Int64, keys)
		wg    sync.WaitGroup
		fails = make(chan error, callers)
	)
	for range callers {
		wg.Go(func() {
			for {
				n := next.Add(1) - 1
				if n >= 2*keys {
					return
				}
				k := n / 2
				key := fmt.Sprint("k", k)
				res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: "h", Lease: time.Minute})
				if err != nil {
					fails <- err
					return
				}
				if res.Status != store.StatusAcquired {
					continue
				}
				wins[k].Add(1)
				toks[k].Store(res.Record.Token)
				if err := s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: key, Token: res.Record.Token, Outcome: []byte(key)}); err != nil {
					fails <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(fails)
	for err := range fails {
		t.Fatal(err)
	}
	for k := range keys {
		require.Equal(t, int64(1), wins[k].Load(), "key %d: wins", k)
		rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: fmt.Sprint("k", k)})
		require.NoError(t, err)
		assert.Equal(t, store.StateCompleted, rec.State)
		assert.Equal(t, toks[k].Load(), rec.Token, "key %d: the record is the winner's", k)
		assert.Equal(t, fmt.Sprint("k", k), string(rec.Outcome))
	}
	t.Logf("%d batches of claims, the largest of %d", batches.Load(), largest.Load())
	require.Positive(t, batches.Load(), "no claims were batched: the test proves nothing")
	require.Greater(t, largest.Load(), int64(1))
}

// TestBatchedClaimsOfOneKeyInOneBatch sends a batch whose calls all name
// one key: one wins, the others are answered with its claim, held, and a
// completion batched beside a stale token's is refused as it would be
// alone.
func TestBatchedClaimsOfOneKeyInOneBatch(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{Batch: true})
	s.AlwaysBatch()
	ctx := context.Background()
	const n = 8
	results := make([]store.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			results[i], err = s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: "k", Holder: fmt.Sprint("h", i), Lease: time.Minute})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	var winner store.Record
	won := 0
	for _, r := range results {
		if r.Status == store.StatusAcquired {
			won++
			winner = r.Record
		}
	}
	require.Equal(t, 1, won)
	for _, r := range results {
		if r.Status != store.StatusAcquired {
			assert.Equal(t, store.StatusHeld, r.Status)
			assert.Equal(t, winner.Token, r.Record.Token)
			assert.Equal(t, winner.Holder, r.Record.Holder)
		}
	}
	errs := make([]error, 2)
	wg.Go(func() {
		errs[0] = s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "k", Token: winner.Token + 1, Outcome: []byte("no")})
	})
	wg.Go(func() {
		errs[1] = s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "k", Token: winner.Token, Outcome: []byte("yes")})
	})
	wg.Wait()
	require.ErrorIs(t, errs[0], store.ErrNotHolder)
	require.NoError(t, errs[1])
	rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, "yes", string(rec.Outcome))
}

// TestLoneCallerIsNotBatched: a caller alone is sent at once on its own
// statements; no batch is ever formed.
func TestLoneCallerIsNotBatched(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	s := newStore(t, pool, schema, pgstore.Options{Batch: true})
	var batches atomic.Int64
	s.SetOnBatch(func(bool, int) { batches.Add(1) })
	ctx := context.Background()
	for i := range 50 {
		key := fmt.Sprint("k", i)
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "t", Key: key, Holder: "h", Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status)
		require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: key, Token: res.Record.Token}))
	}
	assert.Zero(t, batches.Load())
}

// TestBatchWritesTheRowsAloneWrites: a batched claim and completion write
// the row, column for column, that the same calls write alone, so a
// release without batching reads them as its own.
func TestBatchWritesTheRowsAloneWrites(t *testing.T) {
	t.Parallel()
	pool, schema := pgenv.Postgres(t)
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	table := testenv.UniqueName("r")
	alone := newStore(t, pool, schema, pgstore.Options{Table: table, Clock: clock})
	batched := newStore(t, pool, schema, pgstore.Options{Table: table, Clock: clock, Batch: true})
	batched.AlwaysBatch()
	ctx := context.Background()
	for i, s := range []*pgstore.Store{alone, batched} {
		p := store.ClaimParams{Tenant: "t", Key: fmt.Sprint("k", i), Holder: "h", Lease: time.Minute, Check: "digest",
			Retention: 90 * time.Minute, Origin: store.Origin{WorkflowID: "wf", RunID: "run", ActivityType: "Book", ActivityID: "7", Attempt: 2}}
		res, err := s.Claim(ctx, p)
		require.NoError(t, err)
		require.Equal(t, store.StatusAcquired, res.Status)
		require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: p.Key, Token: res.Record.Token, Outcome: []byte("booked")}))
	}
	rows, err := pool.Query(ctx, `SELECT to_jsonb(r) - 'key' - 'token' FROM `+pgx.Identifier{schema, table}.Sanitize()+` r ORDER BY key`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[map[string]any])
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, got[0], got[1], "the batched row differs from the row written alone")
}
