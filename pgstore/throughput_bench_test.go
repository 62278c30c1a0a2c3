package pgstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// BenchmarkContended is issue 11's comparison: every key is claimed by two
// callers, as a duplicate would, and the winner records an outcome. The
// floor is what a hand-written design costs on a table of the same shape:
// INSERT … ON CONFLICT DO NOTHING, and an UPDATE by the winner. Each
// library run reports x-floor-throughput: its keys per second over the
// floor run just before it (1 is parity; run with -count 3 to interleave
// repetitions). The loser of each key does not wait: it only has to learn
// that the key is taken, as in the floor.
func BenchmarkContended(b *testing.B) {
	_, schema := testenv.Postgres(b)
	pool := testenv.PostgresPool(b, benchConns)
	s, err := pgstore.New(pool, pgstore.Options{Schema: schema, Table: testenv.UniqueName("bench")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	ctx := context.Background()
	if err := s.EnsureSchema(ctx); err != nil {
		b.Fatal(err)
	}
	floorTable := pgx.Identifier{schema, testenv.UniqueName("floor")}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+floorTable+` (
	tenant text NOT NULL, key text NOT NULL, state smallint NOT NULL, holder text NOT NULL,
	token bigint NOT NULL, lease_until timestamptz NOT NULL, expires_at timestamptz NOT NULL,
	created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, outcome bytea,
	reason text NOT NULL DEFAULT '', PRIMARY KEY (tenant, key))`); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	// Two consecutive draws share a key: two callers claim each key.
	nextKey := func() string { return "k" + strconv.FormatInt(seq.Add(1)/2, 36) }

	library := func(ctx context.Context) error {
		key := nextKey()
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: "bench", Key: key, Holder: "bench", Lease: time.Minute})
		if err != nil || res.Status != store.StatusAcquired {
			return err
		}
		return s.Complete(ctx, store.CompleteParams{Tenant: "bench", Key: key, Token: res.Record.Token, Outcome: []byte("ok")})
	}
	floor := floorDesign(pool, floorTable, nextKey)

	for _, callers := range []int{1, 8, 32} {
		var floorPerOp float64
		b.Run("callers="+strconv.Itoa(callers)+"/floor", func(b *testing.B) {
			runCallers(b, callers, floor)
			floorPerOp = float64(b.Elapsed()) / float64(b.N)
		})
		b.Run("callers="+strconv.Itoa(callers)+"/library", func(b *testing.B) {
			runCallers(b, callers, library)
			if floorPerOp > 0 {
				b.ReportMetric(floorPerOp/(float64(b.Elapsed())/float64(b.N)), "x-floor-throughput")
			}
		})
	}
}

// floorDesign is the hand-written design: insert the claim unless the key
// exists, and let the winner write the outcome.
func floorDesign(pool *pgxpool.Pool, table string, nextKey func() string) func(ctx context.Context) error {
	insert := `INSERT INTO ` + table + ` (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at)
VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $7) ON CONFLICT DO NOTHING`
	update := `UPDATE ` + table + ` SET state = 2, outcome = $4, updated_at = $5, expires_at = $6
WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1`
	return func(ctx context.Context) error {
		key := nextKey()
		now := time.Now()
		token := store.NewToken()
		tag, err := pool.Exec(ctx, insert, "bench", key, "bench", token, now.Add(time.Minute), now.Add(time.Hour), now)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		now = time.Now()
		_, err = pool.Exec(ctx, update, "bench", key, token, []byte("ok"), now, now.Add(time.Hour))
		return err
	}
}
