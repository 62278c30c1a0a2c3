package pgstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// benchConns bounds the benchmark pool: the server is shared, and 32
// callers on 16 connections is also what a busy worker looks like.
const benchConns = 16

// BenchmarkStore is storetest's store benchmark: Claim and Complete
// against the floor, their statements issued by hand through pgx on the same
// pool (the claim's batch of an insert and a read, then the completion's
// update), reported as lib/floor.
func BenchmarkStore(b *testing.B) {
	_, schema := pgenv.Postgres(b)
	pool := pgenv.PostgresPool(b, benchConns)
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: testenv.UniqueName("bench")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	if err := s.EnsureSchema(context.Background()); err != nil {
		b.Fatal(err)
	}
	storetest.Benchmark(b, s, handRolled(pool, s))
}

// handRolled is the floor: Claim's and Complete's statements with their
// arguments, through the pool, with nothing else: the claim's batch of an
// insert and a read, and, when the insert took the key, the completion's
// update.
func handRolled(pool *pgxpool.Pool, s *pgstore.Store) storetest.Floor {
	insertSQL, readSQL, completeSQL, o := s.ClaimInsertSQL(), s.ClaimReadSQL(), s.CompleteSQL(), s.Options()
	return func(ctx context.Context, key string, outcome []byte) (bool, error) {
		now := time.Now().Truncate(time.Microsecond)
		token := store.NewToken()
		b := &pgx.Batch{}
		b.Queue(insertSQL, "bench", key, "bench", token, now.Add(time.Minute), now.Add(o.TTL), now, "", "", "", "", int32(0),
			(*string)(nil), (*int64)(nil))
		b.Queue(readSQL, "bench", key, token)
		br := pool.SendBatch(ctx, b)
		tag, err := br.Exec()
		if err == nil {
			var rows pgx.Rows
			if rows, err = br.Query(); err == nil {
				rows.Close()
				err = rows.Err()
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil || tag.RowsAffected() != 1 {
			return false, err // Not inserted: the standing record was read.
		}
		var n int64
		now = time.Now()
		return true, pool.QueryRow(ctx, completeSQL, "bench", key, token, now, now.Add(o.TTL), outcome,
			o.NotifyChannel, pgstore.PayloadFor("bench", key)).Scan(&n)
	}
}

// runCallers runs op b.N times across exactly callers goroutines.
func runCallers(b *testing.B, callers int, op func(ctx context.Context) error) {
	b.ReportAllocs()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	b.ResetTimer()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := op(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
