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

// newBenchStore is a store on a table of its own in schema, with caps.
func newBenchStore(b *testing.B, pool *pgxpool.Pool, schema string, caps *pgstore.Capabilities) *pgstore.Store {
	b.Helper()
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: testenv.UniqueName("bench"), Capabilities: caps})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	if err := s.EnsureSchema(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkPortable is storetest's store benchmark of the portable mode
// (every capability off) with the default mode as its floor: the same
// Claim and Complete through a default-mode store on its own table of the
// same pool, run interleaved in the same process. Its lib/floor is the
// portable mode's claim+complete throughput as a fraction of the default
// mode's (portable ÷ default), at 1, 8 and 32 callers.
func BenchmarkPortable(b *testing.B) {
	_, schema := pgenv.Postgres(b)
	pool := pgenv.PostgresPool(b, benchConns)
	def := newBenchStore(b, pool, schema, nil)
	port := newBenchStore(b, pool, schema, &pgstore.Capabilities{})
	storetest.Benchmark(b, port, func(ctx context.Context, key string, outcome []byte) (bool, error) {
		res, err := def.Claim(ctx, store.ClaimParams{Tenant: "bench", Key: key, Holder: "bench", Lease: time.Minute})
		if err != nil || res.Status != store.StatusAcquired {
			return false, err
		}
		return true, def.Complete(ctx, store.CompleteParams{Tenant: "bench", Key: key, Token: res.Record.Token, Outcome: outcome})
	})
}

// BenchmarkWaitWake measures what a waiter costs and how late it learns
// of a settlement, with NOTIFY (the default) and by polling alone (the
// portable mode, at its default intervals): a holder claims a key, a
// duplicate waits on it, and the holder completes hold after the wait
// began (after the wait first read the record pending). wake-ms is the
// time from the completion to the wait's return; reads/wait the reads of
// the record the wait made (its first read and one per poll).
func BenchmarkWaitWake(b *testing.B) {
	_, schema := pgenv.Postgres(b)
	pool := pgenv.PostgresPool(b, benchConns)
	for _, mode := range []struct {
		name string
		caps *pgstore.Capabilities
	}{{"notify", nil}, {"poll", &pgstore.Capabilities{}}} {
		s := newBenchStore(b, pool, schema, mode.caps)
		var reads atomic.Int64
		s.SetOnBlock(func(store.WaitParams) { reads.Add(1) })
		for _, hold := range []time.Duration{0, 100 * time.Millisecond, time.Second} {
			b.Run("mode="+mode.name+"/hold="+hold.String(), func(b *testing.B) {
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
					for reads.Load() == before { // until the wait read the record pending and sleeps
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
				// Each block followed a read; the read that ends the wait is one more.
				b.ReportMetric(float64(reads.Load())/float64(b.N)+1, "reads/wait")
			})
		}
	}
}
