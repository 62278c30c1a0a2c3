package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

const (
	benchTenant = "bench"
	benchTTL    = time.Hour
	benchLease  = time.Minute
	// redisTTL is the Redis records' retention: short, so that the keys a
	// run leaves in the shared Redis go away on their own even when its
	// clean-up does not finish.
	redisTTL = 10 * time.Minute
)

// design is one way of claiming a key and recording its outcome.
type design struct {
	name string
	// claim reports whether the caller won the key, and the token to
	// complete it with.
	claim    func(ctx context.Context, key string) (won bool, token int64, err error)
	complete func(ctx context.Context, key string, token int64) error
}

// cellResult is one throughput measurement.
type cellResult struct {
	pairs    float64 // claim+complete pairs (keys) per second
	wonTwice int     // keys more than one caller won
	keys     int     // keys claimed (each by two callers)
}

// measure runs d with callers goroutines for dur. Claims are numbered from
// one counter and claim n goes to key n/2, so every key is claimed by two
// callers (by different goroutines whenever there are several); the winner
// completes it. The result counts keys per second and keys won twice.
func measure(ctx context.Context, d design, callers int, dur time.Duration, keyPrefix string) (cellResult, error) {
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []int64
		first  error
		stopAt = time.Now().Add(dur)
	)
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []int64
			for time.Now().Before(stopAt) && ctx.Err() == nil {
				n := next.Add(1) - 1
				key := keyPrefix + strconv.FormatInt(n/2, 36)
				ok, tok, err := d.claim(ctx, key)
				if err == nil && ok {
					mine = append(mine, n/2)
					err = d.complete(ctx, key, tok)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%s: %w", d.name, err)
					}
					mu.Unlock()
					break
				}
			}
			mu.Lock()
			won = append(won, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return cellResult{}, first
	}
	slices.Sort(won)
	twice := 0
	for i := 1; i < len(won); i++ {
		if won[i] == won[i-1] && (i == 1 || won[i-1] != won[i-2]) {
			twice++
		}
	}
	claims := next.Load()
	return cellResult{pairs: float64(claims) / 2 / elapsed.Seconds(), wonTwice: twice, keys: int(claims / 2)}, nil
}

// libraryDesign drives a store.Store: Claim, and Complete when acquired.
func libraryDesign(name string, s store.Store) design {
	return design{
		name: name,
		claim: func(ctx context.Context, key string) (bool, int64, error) {
			res, err := s.Claim(ctx, store.ClaimParams{Tenant: benchTenant, Key: key, Holder: "bench", Lease: benchLease})
			return res.Status == store.StatusAcquired, res.Record.Token, err
		},
		complete: func(ctx context.Context, key string, token int64) error {
			return s.Complete(ctx, store.CompleteParams{Tenant: benchTenant, Key: key, Token: token, Outcome: []byte("ok")})
		},
	}
}

// recordTable is pgstore's table, created by hand for the designs that do
// not go through pgstore: the same columns, key and index.
const recordTable = `CREATE TABLE %[1]s (
	tenant text NOT NULL, key text NOT NULL,
	state smallint NOT NULL, holder text NOT NULL, token bigint NOT NULL,
	lease_until timestamptz NOT NULL, expires_at timestamptz NOT NULL,
	created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
	outcome bytea, reason text NOT NULL DEFAULT '',
	PRIMARY KEY (tenant, key));
CREATE INDEX ON %[1]s (expires_at)`

// floorDesign is the hand-written floor: the least a correct claim and
// record can be in PostgreSQL. INSERT … ON CONFLICT DO NOTHING (a row
// inserted means the key is won; the loser learns nothing more) and an
// UPDATE fenced by the token. Its table is pgstore's own, made by
// EnsureSchema, so the floor pays for the same columns and indexes
// (among them the operators' listing index of the records that wait);
// with bare, it is the table without them (recordTable), which says what
// those cost.
func floorDesign(ctx context.Context, e *benchEnv, table string, bare bool) (design, error) {
	t := e.table(table)
	name := "floor"
	if bare {
		name = "floor, bare table"
		if _, err := e.pool.Exec(ctx, fmt.Sprintf(recordTable, t)); err != nil {
			return design{}, err
		}
	} else {
		s, err := pgstore.New(e.pool, pgstore.Options{Schema: e.schema, Table: table, TTL: benchTTL})
		if err != nil {
			return design{}, err
		}
		defer s.Close()
		if err := s.EnsureSchema(ctx); err != nil {
			return design{}, err
		}
	}
	claimSQL := `INSERT INTO ` + t + ` (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason)
VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $7, NULL, '') ON CONFLICT DO NOTHING`
	completeSQL := `UPDATE ` + t + ` SET state = 2, outcome = $4, updated_at = $5, expires_at = $6
WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1`
	return design{
		name: name,
		claim: func(ctx context.Context, key string) (bool, int64, error) {
			now, tok := time.Now(), store.NewToken()
			tag, err := e.pool.Exec(ctx, claimSQL, benchTenant, key, "bench", tok, now.Add(benchLease), now.Add(benchTTL), now)
			return err == nil && tag.RowsAffected() == 1, tok, err
		},
		complete: func(ctx context.Context, key string, token int64) error {
			now := time.Now()
			tag, err := e.pool.Exec(ctx, completeSQL, benchTenant, key, token, []byte("ok"), now, now.Add(benchTTL))
			if err == nil && tag.RowsAffected() != 1 {
				err = errors.New("floor: complete updated no row")
			}
			return err
		},
	}, nil
}

// answeringFloorDesign is the floor with what the contract adds to it:
// a claim that finds the key taken must answer with the record that stands
// (so that a duplicate gets the recorded outcome, or waits for the holder),
// which the floor's loser never learns. Hand-written, that is the floor's
// INSERT … ON CONFLICT DO NOTHING and, when it inserted nothing, a SELECT
// of the row in a second round trip. It runs on pgstore's table.
//
// With bare, it is the same on the bare table (recordTable: the record's
// first columns, the key and the expiry index a sweep needs, nothing
// else): the least the contract costs, the baseline of issue 33's goal 2.
func answeringFloorDesign(ctx context.Context, e *benchEnv, table string, bare bool) (design, error) {
	d, err := floorDesign(ctx, e, table, bare)
	if err != nil {
		return design{}, err
	}
	readSQL := `SELECT tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
	origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt,
	resolution_action, resolved_by, resolution_reason, resolution_reference, resolved_at
FROM ` + e.table(table) + ` WHERE tenant = $1 AND key = $2`
	d.name = "floor + the duplicate's read"
	if bare {
		readSQL = `SELECT tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason
FROM ` + e.table(table) + ` WHERE tenant = $1 AND key = $2`
		d.name = "floor + the duplicate's read, bare table"
	}
	claim := d.claim
	d.claim = func(ctx context.Context, key string) (bool, int64, error) {
		won, tok, err := claim(ctx, key)
		if err != nil || won {
			return won, tok, err
		}
		rows, err := e.pool.Query(ctx, readSQL, benchTenant, key)
		if err != nil {
			return false, 0, err
		}
		for rows.Next() {
			if _, err := rows.Values(); err != nil {
				rows.Close()
				return false, 0, err
			}
		}
		rows.Close()
		return false, 0, rows.Err()
	}
	return d, nil
}

// readThenWriteDesign is the design the library exists to avoid: read the
// key, and when it is free write a claim with an upsert. Two callers that
// both read "free" both win; the harness counts the keys won twice.
func readThenWriteDesign(ctx context.Context, e *benchEnv, table string) (design, error) {
	t := e.table(table)
	if _, err := e.pool.Exec(ctx, fmt.Sprintf(recordTable, t)); err != nil {
		return design{}, err
	}
	readSQL := `SELECT state, expires_at FROM ` + t + ` WHERE tenant = $1 AND key = $2`
	writeSQL := `INSERT INTO ` + t + ` (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason)
VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $7, NULL, '')
ON CONFLICT (tenant, key) DO UPDATE SET state = 1, holder = EXCLUDED.holder, token = EXCLUDED.token,
	lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at, outcome = NULL`
	completeSQL := `UPDATE ` + t + ` SET state = 2, outcome = $4, updated_at = $5, expires_at = $6
WHERE tenant = $1 AND key = $2 AND token = $3 AND state = 1`
	return design{
		name: "read-then-write",
		claim: func(ctx context.Context, key string) (bool, int64, error) {
			var (
				state   int16
				expires time.Time
			)
			now := time.Now()
			err := e.pool.QueryRow(ctx, readSQL, benchTenant, key).Scan(&state, &expires)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return false, 0, err
			case expires.After(now):
				return false, 0, nil
			}
			tok := store.NewToken()
			_, err = e.pool.Exec(ctx, writeSQL, benchTenant, key, "bench", tok, now.Add(benchLease), now.Add(benchTTL), now)
			return err == nil, tok, err
		},
		complete: func(ctx context.Context, key string, token int64) error {
			now := time.Now()
			// A caller whose claim was overwritten updates nothing: that
			// is the design's failure, counted as a key won twice, not an
			// error of the harness.
			_, err := e.pool.Exec(ctx, completeSQL, benchTenant, key, token, []byte("ok"), now, now.Add(benchTTL))
			return err
		},
	}, nil
}

// serializableDesign is the lock-column design of brandur's "Implementing
// Stripe-like idempotency keys in Postgres": a keys table with a locked_at
// column and a recovery point, each step a SERIALIZABLE transaction that
// reads the key FOR UPDATE, retried on serialization failure.
func serializableDesign(ctx context.Context, e *benchEnv, table string) (design, error) {
	t := e.table(table)
	_, err := e.pool.Exec(ctx, `CREATE TABLE `+t+` (
	id bigserial PRIMARY KEY, tenant text NOT NULL, key text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(), last_run_at timestamptz NOT NULL DEFAULT now(),
	locked_at timestamptz, recovery_point text NOT NULL, response_body bytea,
	UNIQUE (tenant, key))`)
	if err != nil {
		return design{}, err
	}
	serializable := pgx.TxOptions{IsoLevel: pgx.Serializable}
	retry := func(ctx context.Context, fn func(pgx.Tx) error) error {
		for {
			err := pgx.BeginTxFunc(ctx, e.pool, serializable, fn)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "23505") {
				continue
			}
			return err
		}
	}
	return design{
		name: "serializable lock-column",
		claim: func(ctx context.Context, key string) (bool, int64, error) {
			var won bool
			err := retry(ctx, func(tx pgx.Tx) error {
				won = false
				var (
					locked   *time.Time
					recovery string
				)
				err := tx.QueryRow(ctx, `SELECT locked_at, recovery_point FROM `+t+` WHERE tenant = $1 AND key = $2 FOR UPDATE`,
					benchTenant, key).Scan(&locked, &recovery)
				switch {
				case errors.Is(err, pgx.ErrNoRows):
					_, err = tx.Exec(ctx, `INSERT INTO `+t+` (tenant, key, locked_at, recovery_point) VALUES ($1, $2, now(), 'started')`, benchTenant, key)
					won = err == nil
					return err
				case err != nil:
					return err
				case recovery == "finished", locked != nil && time.Since(*locked) < benchLease:
					return nil
				}
				_, err = tx.Exec(ctx, `UPDATE `+t+` SET locked_at = now(), last_run_at = now() WHERE tenant = $1 AND key = $2`, benchTenant, key)
				won = err == nil
				return err
			})
			return won, 0, err
		},
		complete: func(ctx context.Context, key string, _ int64) error {
			return retry(ctx, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `UPDATE `+t+` SET locked_at = NULL, recovery_point = 'finished', response_body = $3 WHERE tenant = $1 AND key = $2`,
					benchTenant, key, []byte("ok"))
				return err
			})
		},
	}, nil
}

// redisFloorDesign is raw Redis: SET NX claims, SET XX records. Its keys
// share a hash tag, as a tenant's records do in redisstore, so that on a
// Cluster they live on one master as the store's do.
func redisFloorDesign(rc redis.UniversalClient, prefix string) design {
	return design{
		name: "raw SET NX + SET XX",
		claim: func(ctx context.Context, key string) (bool, int64, error) {
			tok := store.NewToken()
			ok, err := rc.SetNX(ctx, prefix+":floor:{t}:"+key, tok, redisTTL).Result()
			return ok, tok, err
		},
		complete: func(ctx context.Context, key string, _ int64) error {
			return rc.SetXX(ctx, prefix+":floor:{t}:"+key, "2:ok", redisTTL).Err()
		},
	}
}

// throughputSlices is how many turns each design takes within one cell.
const throughputSlices = 5

// benchThroughput is section 1.
func benchThroughput(ctx context.Context, e *benchEnv, cfg config, out, progress io.Writer) error {
	ps, err := pgstore.New(e.pool, pgstore.Options{Schema: e.schema, Table: "lib", TTL: benchTTL})
	if err != nil {
		return err
	}
	defer ps.Close()
	if err := ps.EnsureSchema(ctx); err != nil {
		return err
	}
	floor, err := floorDesign(ctx, e, "floor", false)
	if err != nil {
		return err
	}
	bare, err := floorDesign(ctx, e, "floor_bare", true)
	if err != nil {
		return err
	}
	answering, err := answeringFloorDesign(ctx, e, "floor_read", false)
	if err != nil {
		return err
	}
	answeringBare, err := answeringFloorDesign(ctx, e, "floor_read_bare", true)
	if err != nil {
		return err
	}
	pb, err := pgstore.New(e.pool, pgstore.Options{Schema: e.schema, Table: "lib_batch", TTL: benchTTL, Batch: true})
	if err != nil {
		return err
	}
	defer pb.Close()
	if err := pb.EnsureSchema(ctx); err != nil {
		return err
	}

	rtw, err := readThenWriteDesign(ctx, e, "rtw")
	if err != nil {
		return err
	}
	ser, err := serializableDesign(ctx, e, "ser")
	if err != nil {
		return err
	}
	rs, err := redisstore.New(e.redis, redisstore.Options{Prefix: e.prefix + ":lib", TTL: redisTTL})
	if err != nil {
		return err
	}
	defer rs.Close()

	// The same with the pool pgx makes by default (max(4, CPUs)
	// connections): a worker's claims then wait for connections sooner,
	// which is where batching shares them.
	dcfg, err := pgxpool.ParseConfig(pgenv.PostgresURL())
	if err != nil {
		return err
	}
	dpool, err := pgxpool.NewWithConfig(ctx, dcfg)
	if err != nil {
		return err
	}
	defer dpool.Close()
	de := *e
	de.pool = dpool
	dfloor, err := floorDesign(ctx, &de, "floor_dp", false)
	if err != nil {
		return err
	}
	var dstores []design
	for _, batch := range []bool{false, true} {
		name, table := "pgstore", "lib_dp"
		if batch {
			name, table = nameBatched, "lib_batch_dp"
		}
		st, err := pgstore.New(dpool, pgstore.Options{Schema: e.schema, Table: table, TTL: benchTTL, Batch: batch})
		if err != nil {
			return err
		}
		defer st.Close()
		if err := st.EnsureSchema(ctx); err != nil {
			return err
		}
		dstores = append(dstores, libraryDesign(name, st))
	}

	groups := []designGroup{
		{"PostgreSQL", floor, []design{libraryDesign("pgstore", ps), libraryDesign(nameBatched, pb), answering, answeringBare, bare, rtw, ser}},
		{fmt.Sprintf("PostgreSQL, pgx's default pool (%d)", dcfg.MaxConns), dfloor, dstores},
		{"Redis", redisFloorDesign(e.redis, e.prefix), []design{
			libraryDesign("redisstore", rs),
			redisSparseDesign(e.redis, e.prefix),
			redisPackedDesign(e.redis, e.prefix, true),
			redisPackedDesign(e.redis, e.prefix, false),
			redisPartsDesign("release 2 layout: script, record hash", e.redis, e.prefix, false, false),
			redisPartsDesign("release 2 layout: + tenant index", e.redis, e.prefix, true, false),
		}},
	}
	if e.cluster != nil {
		cs, err := redisstore.New(e.cluster, redisstore.Options{Prefix: e.prefix + ":lib", TTL: redisTTL})
		if err != nil {
			return err
		}
		defer cs.Close()
		groups = append(groups, designGroup{"Redis Cluster", redisFloorDesign(e.cluster, e.prefix), []design{
			libraryDesign("redisstore", cs),
			redisSparseDesign(e.cluster, e.prefix),
			redisPackedDesign(e.cluster, e.prefix, true),
		}})
	}
	if e.citus != nil {
		g, done, err := citusGroup(ctx, e)
		if err != nil {
			return fmt.Errorf("citus: %w", err)
		}
		defer done()
		groups = append(groups, g)
	}
	type key struct {
		group, design, callers int
	}
	results := map[key][]cellResult{}
	// Warm up: load scripts, fill pools, sync the stores' clocks.
	for _, g := range groups {
		for di, d := range append([]design{g.base}, g.designs...) {
			if _, err := measure(ctx, d, 4, 50*time.Millisecond, fmt.Sprintf("warm%d-", di)); err != nil {
				return err
			}
		}
	}
	for rep := range cfg.Reps {
		for gi, g := range groups {
			for _, c := range cfg.Callers {
				// The floor and every design take turns in short
				// slices, in an order that turns with the repetition
				// and the slice, so a slow patch of the shared machine
				// hits them alike; a cell is the sum of its slices.
				all := append([]design{g.base}, g.designs...)
				sum := make([]cellResult, len(all))
				secs := make([]float64, len(all))
				for sl := range throughputSlices {
					for k := range all {
						di := (k + rep + sl) % len(all)
						prefix := fmt.Sprintf("r%dc%dd%ds%d-", rep, c, di, sl)
						r, err := measure(ctx, all[di], c, cfg.Cell/throughputSlices, prefix)
						if err != nil {
							return err
						}
						sum[di].keys += r.keys
						sum[di].wonTwice += r.wonTwice
						secs[di] += float64(r.keys) / r.pairs
					}
				}
				for di := range all {
					r := sum[di]
					r.pairs = float64(r.keys) / secs[di]
					results[key{gi, di, c}] = append(results[key{gi, di, c}], r)
					fmt.Fprintf(progress, "   rep %d %-10s %-26s callers=%-3d %8.0f pairs/s won twice %d\n",
						rep+1, g.title, all[di].name, c, r.pairs, r.wonTwice)
				}
			}
		}
	}
	fmt.Fprintf(out, "## 1. Store throughput\n\nClaim+complete pairs per second, every key claimed by two callers, %s per cell taken in %d slices alternating with the other designs, PostgreSQL pool of %d connections. "+
		"Ratio = design ÷ floor within one repetition: median (min–max) of %d.\n\n", cfg.Cell, throughputSlices, cfg.PoolConns, cfg.Reps)
	fmt.Fprintln(out, "| store | design | callers | pairs/s | ÷ floor | keys won twice |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for gi, g := range groups {
		all := append([]design{g.base}, g.designs...)
		for di, d := range all {
			for _, c := range cfg.Callers {
				rs := results[key{gi, di, c}]
				base := results[key{gi, 0, c}]
				var pairs, basePairs []float64
				twice := 0
				for i := range rs {
					pairs = append(pairs, rs[i].pairs)
					basePairs = append(basePairs, base[i].pairs)
					twice += rs[i].wonTwice
				}
				ratio := "1"
				if di > 0 {
					ratio = spread(ratios(pairs, basePairs), "%.2f")
				}
				fmt.Fprintf(out, "| %s | %s | %d | %s | %s | %d |\n", g.title, d.name, c, spread(pairs, "%.0f"), ratio, twice)
			}
		}
	}
	fmt.Fprintln(out)
	throughputGoals(e, cfg, groups, func(gi, di, c int) []float64 {
		var xs []float64
		for _, r := range results[key{gi, di, c}] {
			xs = append(xs, r.pairs)
		}
		return xs
	})
	// What a completed record costs Redis: its hash, as MEMORY USAGE
	// reports it (see redisstore's key layout).
	rkey := e.prefix + ":lib:{" + base64.RawURLEncoding.EncodeToString([]byte(benchTenant)) + "}:r:r0c1d1s0-0"
	if len(cfg.Callers) > 0 && cfg.Callers[0] == 1 {
		if n, err := e.redis.MemoryUsage(ctx, rkey).Result(); err == nil {
			fmt.Fprintf(out, "A completed redisstore record with a 10-byte key and a 2-byte outcome takes %d bytes (MEMORY USAGE of its packed string), plus its member in the tenant's age index.\n\n", n)
		}
	}
	return nil
}

// designGroup is a table's group of designs: one store, a base to divide
// by, the designs.
type designGroup struct {
	title   string
	base    design
	designs []design
}

// Names of the designs issue 33's goals divide.
const (
	nameRedisSparse = "redisstore, index only what waits"
	nameBareRead    = "floor + the duplicate's read, bare table"
	nameBatched     = "pgstore, concurrent calls batched"
)

// throughputGoals records issue 33's goals 1–3 from the section's figures:
// pairs(group, design, callers) gives one figure per repetition, the
// design 0 being the group's base.
func throughputGoals(e *benchEnv, cfg config, groups []designGroup, pairs func(gi, di, c int) []float64) {
	find := func(gi int, name string) int {
		for di, d := range groups[gi].designs {
			if d.name == name {
				return di + 1
			}
		}
		return -1
	}
	for gi, g := range groups {
		for _, c := range cfg.Callers {
			at := fmt.Sprintf("%d callers", c)
			switch {
			case strings.HasPrefix(g.title, "Redis"):
				if di := find(gi, nameRedisSparse); di > 0 {
					e.addGoal(goal{what: g.title + ": " + nameRedisSparse + " ÷ raw", at: at, ratios: ratios(pairs(gi, di, c), pairs(gi, 0, c)), bound: 0.8})
				}
			case strings.HasPrefix(g.title, "PostgreSQL"):
				lib, bare, batched := find(gi, "pgstore"), find(gi, nameBareRead), find(gi, nameBatched)
				if lib > 0 && bare > 0 {
					e.addGoal(goal{what: g.title + ": pgstore ÷ " + nameBareRead, at: at, ratios: ratios(pairs(gi, lib, c), pairs(gi, bare, c)), bound: 0.9})
				}
				switch {
				case batched < 0:
				case c >= 32:
					e.addGoal(goal{what: g.title + ": " + nameBatched + " ÷ floor (per call)", at: at, ratios: ratios(pairs(gi, batched, c), pairs(gi, 0, c)), bound: 1.5})
				case lib > 0:
					// Fewer callers: batching must cost nothing.
					e.addGoal(goal{what: g.title + ": " + nameBatched + " ÷ pgstore", at: at, ratios: ratios(pairs(gi, batched, c), pairs(gi, lib, c)), bound: 0.95})
				}
			}
		}
	}
}
