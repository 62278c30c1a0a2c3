package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store"
)

// preload inserts n records into a pgstore table in one statement: live
// completed records when expired is false, records whose retention ended an
// hour ago otherwise. Keys are prefix + a number padded to 64 digits, about
// the length of a real key (67 bytes); holders, origins and outcomes are of
// a realistic size too, so that the table's bytes per record mean something.
func preload(ctx context.Context, e *benchEnv, table, prefix string, n int, expired bool) error {
	exp := "now() + interval '1 day'"
	if expired {
		exp = "now() - interval '1 hour'"
	}
	_, err := e.pool.Exec(ctx, `INSERT INTO `+e.table(table)+` (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
	origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt)
SELECT $1, $2 || lpad(i::text, 64, '0'), 2, 'worker-7f9c@4711/booking-wf/attempt-1', i, now(), `+exp+`, now(), now(),
	convert_to('{"confirmation":"' || i || '"}', 'UTF8'), '',
	'booking-' || i, '0193c4a1-7e5f-7b6a-9c1d-' || lpad(i::text, 12, '0'), 'Book', '5', 1
FROM generate_series(1, $3::int) AS i`,
		benchTenant, prefix, n)
	if err != nil {
		return err
	}
	_, err = e.pool.Exec(ctx, `ANALYZE `+e.table(table))
	return err
}

// backlogTenants is how many tenants share the backlog preloadBacklog
// writes; benchTenant holds backlogBench of its records.
const (
	backlogTenants = 100
	backlogBench   = 400
)

// preloadBacklog adds the records that wait for a person, the same in every
// table whatever its size: n indeterminate records (which never expire)
// and n pending records whose lease ran out an hour ago, spread over
// backlogTenants tenants, of which benchTenant holds backlogBench, claimed
// over the last four days. The listings read them; the completed records
// around them are what the table's size adds.
func preloadBacklog(ctx context.Context, e *benchEnv, table string, n int) error {
	_, err := e.pool.Exec(ctx, `INSERT INTO `+e.table(table)+` (tenant, key, state, holder, token, lease_until, expires_at, created_at, updated_at, outcome, reason,
	origin_workflow_id, origin_run_id, origin_activity_type, origin_activity_id, origin_attempt)
SELECT CASE WHEN i <= $2::int THEN $1 ELSE 'tenant-' || (i % $3::int) END,
	'backlog-' || s || '-' || lpad(i::text, 56, '0'), s, 'worker-7f9c@4711/booking-wf/attempt-1', i,
	now() - interval '1 hour',
	CASE WHEN s = 3 THEN $4::timestamptz ELSE now() + interval '1 day' END,
	now() - (i * 37 % 5760) * interval '1 minute', now(), NULL,
	CASE WHEN s = 3 THEN 'the airline did not answer' ELSE '' END,
	'booking-' || i, '0193c4a1-7e5f-7b6a-9c1d-' || lpad(i::text, 12, '0'), CASE WHEN i % 2 = 0 THEN 'Book' ELSE 'Charge' END, '5', 1
FROM generate_series(1, $5::int) AS i, (VALUES (1::smallint), (3::smallint)) AS st(s)`,
		benchTenant, backlogBench/2, backlogTenants-1, store.NeverExpires, n)
	if err != nil {
		return err
	}
	_, err = e.pool.Exec(ctx, `ANALYZE `+e.table(table))
	return err
}

// listing is one of the operators' queries, timed on each table.
type listing struct {
	name string
	run  func(ctx context.Context, s *pgstore.Store) (int, error)
}

// listings are the queries idempotencyctl list and the backlog gauge run:
// what waits in one tenant (a first page and the one after it), the stale
// claims, the old ones, what waits across tenants, and the count by
// activity type.
func listings() []listing {
	waiting := []store.State{store.StateIndeterminate, store.StatePending}
	page := func(p store.ListParams, pages int, across bool) func(ctx context.Context, s *pgstore.Store) (int, error) {
		return func(ctx context.Context, s *pgstore.Store) (int, error) {
			p := p // every call starts at the first page
			n := 0
			for range pages {
				var (
					pg  store.Page
					err error
				)
				if across {
					pg, err = s.ListAcrossTenants(ctx, p)
				} else {
					pg, err = s.List(ctx, p)
				}
				if err != nil {
					return n, err
				}
				n += len(pg.Records)
				if pg.Next == "" {
					break
				}
				p.Cursor = pg.Next
			}
			return n, nil
		}
	}
	return []listing{
		{"one tenant's indeterminate records, first page of 50", page(store.ListParams{Tenant: benchTenant, States: []store.State{store.StateIndeterminate}, Limit: 50}, 1, false)},
		{"… and its second page (cursor)", page(store.ListParams{Tenant: benchTenant, States: []store.State{store.StateIndeterminate}, Limit: 50}, 2, false)},
		{"one tenant's stale claims (-stale), page of 100", page(store.ListParams{Tenant: benchTenant, Stale: true}, 1, false)},
		{"what waits in one tenant, older than a day, oldest first", page(store.ListParams{Tenant: benchTenant, States: waiting, Stale: true, OlderThan: 24 * time.Hour, Order: store.OldestFirst}, 1, false)},
		{"what waits across tenants, first page of 100", page(store.ListParams{States: waiting, Stale: true}, 1, true)},
		{"… and its second page (cursor)", page(store.ListParams{States: waiting, Stale: true}, 2, true)},
		{"CountBacklog (the gauge)", func(ctx context.Context, s *pgstore.Store) (int, error) {
			counts, err := s.CountBacklog(ctx)
			n := 0
			for _, c := range counts {
				n += c.Indeterminate + c.Stale
			}
			return n, err
		}},
	}
}

// claimLatencies claims n fresh keys one after another, completing each,
// and returns how long each Claim took.
func claimLatencies(ctx context.Context, s store.Store, prefix string, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := range n {
		key := fmt.Sprintf("%s%d", prefix, i)
		t := time.Now()
		res, err := s.Claim(ctx, store.ClaimParams{Tenant: benchTenant, Key: key, Holder: "bench", Lease: benchLease})
		if err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
		if err := s.Complete(ctx, store.CompleteParams{Tenant: benchTenant, Key: key, Token: res.Record.Token, Outcome: []byte("ok")}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// benchGrowth is section 4.
func benchGrowth(ctx context.Context, e *benchEnv, cfg config, out, progress io.Writer) error {
	sizes := []struct {
		table string
		live  int
	}{{"growth_small", cfg.GrowthBase}, {"growth_large", cfg.GrowthRows}}
	stores := make([]*pgstore.Store, len(sizes))
	var loaded []string
	for i, sz := range sizes {
		s, err := pgstore.New(e.pool, pgstore.Options{Schema: e.schema, Table: sz.table, TTL: benchTTL})
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.EnsureSchema(ctx); err != nil {
			return err
		}
		stores[i] = s
		t := time.Now()
		if err := preload(ctx, e, sz.table, "live", sz.live, false); err != nil {
			return err
		}
		if err := preloadBacklog(ctx, e, sz.table, cfg.Backlog); err != nil {
			return err
		}
		loaded = append(loaded, fmt.Sprintf("%d live records and a backlog of %d in %s", sz.live, 2*cfg.Backlog, time.Since(t).Round(time.Millisecond)))
	}
	large := stores[1]
	t := time.Now()
	if err := preload(ctx, e, sizes[1].table, "expired", cfg.SweepRows, true); err != nil {
		return err
	}
	loaded = append(loaded, fmt.Sprintf("%d expired records in %s", cfg.SweepRows, time.Since(t).Round(time.Millisecond)))
	fmt.Fprintf(progress, "   loaded %v\n", loaded)
	var total, heap int64
	if err := e.pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass), pg_relation_size($1::regclass)`, e.table(sizes[1].table)).Scan(&total, &heap); err != nil {
		return err
	}
	perRecord := float64(total) / float64(cfg.GrowthRows+cfg.SweepRows)

	lat := make([][]time.Duration, len(sizes))
	var p50s, p99s [2][]float64
	for rep := range cfg.Reps {
		for k := range sizes {
			i := (k + rep) % len(sizes)
			ds, err := claimLatencies(ctx, stores[i], fmt.Sprintf("c%d-", rep), cfg.ClaimN)
			if err != nil {
				return err
			}
			lat[i] = append(lat[i], ds...)
			p50s[i] = append(p50s[i], float64(percentile(ds, 50)))
			p99s[i] = append(p99s[i], float64(percentile(ds, 99)))
		}
		fmt.Fprintf(progress, "   rep %d: claim p50 %s ms (%d rows) vs %s ms (%d rows)\n", rep+1,
			ms(time.Duration(p50s[0][rep])), sizes[0].live, ms(time.Duration(p50s[1][rep])), sizes[1].live)
	}

	// The listings, timed on both tables in turn, before the sweep (while
	// the large table still holds its expired records too).
	ls := listings()
	listLat := make([][2][]time.Duration, len(ls))
	listRatios := make([][]float64, len(ls))
	listRows := make([][2]int, len(ls))
	for rep := range cfg.Reps {
		var p50 [2]float64
		for li, l := range ls {
			for k := range sizes {
				i := (k + rep) % len(sizes)
				var ds []time.Duration
				for range cfg.ListN {
					t := time.Now()
					n, err := l.run(ctx, stores[i])
					if err != nil {
						return fmt.Errorf("%s: %w", l.name, err)
					}
					ds = append(ds, time.Since(t))
					listRows[li][i] = n
				}
				listLat[li][i] = append(listLat[li][i], ds...)
				p50[i] = float64(percentile(ds, 50))
			}
			listRatios[li] = append(listRatios[li], p50[1]/p50[0])
		}
		fmt.Fprintf(progress, "   rep %d: listings timed\n", rep+1)
	}

	// The sweep, with one caller claiming and completing fresh keys on
	// the same table for as long as it runs.
	var (
		during []time.Duration
		stop   atomic.Bool
		wg     sync.WaitGroup
		cerr   error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			ds, err := claimLatencies(ctx, large, fmt.Sprintf("s%d-", i), 1)
			if err != nil {
				cerr = err
				return
			}
			during = append(during, ds...)
		}
	}()
	t = time.Now()
	swept, err := store.Sweep(ctx, large, cfg.SweepBatch)
	sweepTook := time.Since(t)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if swept != cfg.SweepRows {
		return fmt.Errorf("swept %d records, want the %d expired ones", swept, cfg.SweepRows)
	}

	fmt.Fprintf(out, "## 4. Growth and sweep (pgstore)\n\nClaim latency (one caller, fresh keys, each completed) on a table of %d and of %d live records "+
		"(the large one also holds %d expired records until the sweep). %d claims per size and repetition. Ratio = large ÷ small within one repetition: median (min–max) of %d.\n\n",
		sizes[0].live, sizes[1].live, cfg.SweepRows, cfg.ClaimN, cfg.Reps)
	fmt.Fprintln(out, "| records | claim p50 ms | claim p99 ms |")
	fmt.Fprintln(out, "|---|---|---|")
	for i, sz := range sizes {
		fmt.Fprintf(out, "| %d | %s | %s |\n", sz.live, ms(percentile(lat[i], 50)), ms(percentile(lat[i], 99)))
	}
	fmt.Fprintf(out, "| large ÷ small | %s | %s |\n\n", spread(ratios(p50s[1], p50s[0]), "%.2f"), spread(ratios(p99s[1], p99s[0]), "%.2f"))
	fmt.Fprintf(out, "Sweep: %d expired records in batches of %d took %s (%.0f records/s). Claims during the sweep: %d, p50 %s ms, p99 %s ms, max %s ms "+
		"(before it, on the same table: p99 %s ms).\n\n",
		swept, cfg.SweepBatch, sweepTook.Round(time.Millisecond), float64(swept)/sweepTook.Seconds(),
		len(during), ms(percentile(during, 50)), ms(percentile(during, 99)), ms(percentile(during, 100)), ms(percentile(lat[1], 99)))
	fmt.Fprintf(out, "The operators' listings (idempotencyctl list, the backlog gauge) on the same two tables, each holding the same backlog: "+
		"%d indeterminate records and %d stale claims over %d tenants, %d of them in the tenant listed. %d calls per query, size and repetition; "+
		"ratio = large ÷ small p50 within one repetition.\n\n", cfg.Backlog, cfg.Backlog, backlogTenants, backlogBench, cfg.ListN)
	fmt.Fprintln(out, "| query | records returned | p50 ms, small | p50 ms, large | large ÷ small |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	for li, l := range ls {
		fmt.Fprintf(out, "| %s | %d | %s | %s | %s |\n", l.name, listRows[li][1], ms(percentile(listLat[li][0], 50)), ms(percentile(listLat[li][1], 50)),
			spread(listRatios[li], "%.2f"))
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "Loaded: %s. Size of the large table: %.0f MB with its indexes (%.0f MB of rows), %.0f bytes per record.\n\n",
		joinComma(loaded), float64(total)/1e6, float64(heap)/1e6, perRecord)
	return nil
}

func joinComma(xs []string) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += "; "
		}
		s += x
	}
	return s
}
