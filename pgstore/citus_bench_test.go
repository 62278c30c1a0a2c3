package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// The store's figures on Citus (make bench-citus: the cluster make
// test-citus starts), each beside its floor on the same cluster, in the
// same process, run interleaved.

// citusBenchStore is a store on the cluster with the detected capabilities,
// on a table of its own that EnsureSchema distributed by tenant.
func citusBenchStore(b *testing.B) (*pgxpool.Pool, *pgstore.Store) {
	b.Helper()
	_, schema := citus(b)
	pool := citusPool(b, benchConns)
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: testenv.UniqueName("bench"), Capabilities: citusCaps(b, pool)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	if err := s.EnsureSchema(context.Background()); err != nil {
		b.Fatal(err)
	}
	requireDistributed(b, pool, s.TableName())
	return pool, s
}

// BenchmarkCitusStore is storetest's store benchmark on Citus: the
// portable mode's Claim and Complete against the floor, their statements
// issued by hand through pgx on the same pool (the claim's batch of an
// insert and a read, then the completion's update), reported as
// lib/floor. Every key is in one tenant, so on one shard of one worker.
func BenchmarkCitusStore(b *testing.B) {
	pool, s := citusBenchStore(b)
	storetest.Benchmark(b, s, handRolledPortable(pool, s))
}

// handRolledPortable is handRolled for a store without Notify: its
// completion binds no channel or payload, and is a plain UPDATE.
func handRolledPortable(pool *pgxpool.Pool, s *pgstore.Store) storetest.Floor {
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
		now = time.Now()
		_, err = pool.Exec(ctx, completeSQL, "bench", key, token, now, now.Add(o.TTL), outcome)
		return true, err
	}
}

// BenchmarkCitusWaitWake is BenchmarkWaitWake on Citus, where waiters
// poll (the portable mode's defaults: 20 ms backing off to 500 ms).
func BenchmarkCitusWaitWake(b *testing.B) {
	_, s := citusBenchStore(b)
	var reads atomic.Int64
	s.SetOnBlock(func(store.WaitParams) { reads.Add(1) })
	for _, hold := range []time.Duration{0, 100 * time.Millisecond, time.Second} {
		b.Run("mode=poll/hold="+hold.String(), func(b *testing.B) {
			ctx := context.Background()
			var late time.Duration
			reads.Store(0)
			for i := 0; i < b.N; i++ {
				key := testenv.UniqueName("wake")
				before := reads.Load()
				res, err := s.Claim(ctx, store.ClaimParams{Tenant: "bench", Key: key, Holder: "bench", Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				done := make(chan time.Time, 1)
				go func() {
					_, err := s.Wait(ctx, store.WaitParams{Tenant: "bench", Key: key, Token: res.Record.Token})
					if err != nil {
						b.Error(err)
					}
					done <- time.Now()
				}()
				for reads.Load() == before {
					time.Sleep(50 * time.Microsecond)
				}
				time.Sleep(hold)
				if err := s.Complete(ctx, store.CompleteParams{Tenant: "bench", Key: key, Token: res.Record.Token}); err != nil {
					b.Fatal(err)
				}
				completed := time.Now()
				late += (<-done).Sub(completed)
			}
			b.ReportMetric(float64(late.Microseconds())/1000/float64(b.N), "wake-ms")
			b.ReportMetric(float64(reads.Load())/float64(b.N)+1, "reads/wait")
		})
	}
}
