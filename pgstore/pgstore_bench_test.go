package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// benchConns bounds the benchmark pool: the server is shared, and 32
// callers on 16 connections is also what a busy worker looks like.
const benchConns = 16

// BenchmarkClaimComplete measures a fresh key's Claim followed by its
// Complete with 1, 8 and 32 concurrent callers, and the same two statements
// issued by hand through pgx with no library in between (the floor), in the
// same process on the same pool. Each library sub-benchmark reports
// x-floor, its time per operation over the floor's run just before it: the
// library's overhead as a ratio, which stays meaningful on a noisy machine
// where absolute times do not.
func BenchmarkClaimComplete(b *testing.B) {
	_, schema := testenv.Postgres(b)
	pool := testenv.PostgresPool(b, benchConns)
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: testenv.UniqueName("bench")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	if err := s.EnsureSchema(context.Background()); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	nextKey := func() string { return "k" + strconv.FormatInt(seq.Add(1), 36) }

	library := func(ctx context.Context) error {
		key := nextKey()
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "bench", Key: key, Holder: "bench", Lease: time.Minute})
		if err != nil {
			return err
		}
		return s.Complete(ctx, store.CompleteParams{Tenant: "bench", Key: key, Token: res.Record.Token, Outcome: []byte("ok")})
	}
	floor := handRolled(pool, s, nextKey)

	for _, callers := range []int{1, 8, 32} {
		// The floor runs first; its last (largest) run's time per
		// operation is the baseline the library's run is divided by.
		var floorPerOp float64
		b.Run("callers="+strconv.Itoa(callers)+"/floor", func(b *testing.B) {
			runCallers(b, callers, floor)
			floorPerOp = float64(b.Elapsed()) / float64(b.N)
		})
		b.Run("callers="+strconv.Itoa(callers)+"/library", func(b *testing.B) {
			runCallers(b, callers, library)
			if floorPerOp > 0 {
				b.ReportMetric(float64(b.Elapsed())/float64(b.N)/floorPerOp, "x-floor")
			}
		})
	}
}

// handRolled is the floor: Claim's and Complete's statements with their
// arguments, through the pool, with nothing else: the claim's batch of an
// insert and a read, and the completion's update.
func handRolled(pool *pgxpool.Pool, s *pgstore.Store, nextKey func() string) func(ctx context.Context) error {
	insertSQL, readSQL, completeSQL, o := s.ClaimInsertSQL(), s.ClaimReadSQL(), s.CompleteSQL(), s.Options()
	return func(ctx context.Context) error {
		key := nextKey()
		now := time.Now().Truncate(time.Microsecond)
		token := store.NewToken()
		b := &pgx.Batch{}
		b.Queue(insertSQL, "bench", key, "bench", token, now.Add(time.Minute), now.Add(o.TTL), now, "", "", "", "", int32(0))
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
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return errors.New("a fresh key was not inserted")
		}
		var n int64
		now = time.Now()
		return pool.QueryRow(ctx, completeSQL, "bench", key, token, now, now.Add(o.TTL), []byte("ok"),
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
