package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/store"
)

// listBatch is how many entries of an age index one round trip reads.
const listBatch = 256

// listBudget bounds how many entries of an age index one List call walks.
// A call that reaches it returns the records it found, possibly none, with
// a cursor after the last entry it walked.
const listBudget = 8192

// List implements [store.Store.List]. It pages through the tenant's age
// index (a sorted set of its keys by claim time) from the cursor on, reads
// the records of each batch in one pipeline, and keeps those that are live
// and pass the filters. A filter that keeps few of the tenant's records
// (indeterminate among millions completed) reads past the records it skips,
// up to a bound per call: such a page may hold fewer records than the limit,
// even none, and still have a Next. See the package documentation.
func (s *Store) List(ctx context.Context, p store.ListParams) (store.Page, error) {
	const op = "list"
	if err := p.Validate(); err != nil {
		return store.Page{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Page{}, translate(ctx, op, err)
	}
	after, _ := p.After(false)
	now := s.now(ctx)
	walk, err := s.walking(ctx)
	if err != nil {
		return store.Page{}, translate(ctx, op, err)
	}
	if walk {
		page, err := s.listWalk(ctx, p, false, now)
		if err != nil {
			return store.Page{}, translate(ctx, op, err)
		}
		return page, nil
	}
	recs, walked, err := s.listTenant(ctx, p, p.Tenant, after, false, now, p.EffectiveLimit()+1, s.listBudget)
	if err != nil {
		return store.Page{}, translate(ctx, op, err)
	}
	page := pageOf(p, recs, false)
	if walked != nil && page.Next == "" {
		page.Next = walked.Cursor(p, false)
	}
	return page, nil
}

// ListAcrossTenants implements [store.Store.ListAcrossTenants]. It is for
// operators: it finds the tenants' age indexes with SCAN (on every master of a Cluster),
// reads a page from each tenant's age index, and merges them, so a page
// costs a round trip or more per tenant.
func (s *Store) ListAcrossTenants(ctx context.Context, p store.ListParams) (store.Page, error) {
	const op = "list across tenants"
	if err := p.ValidateAcrossTenants(); err != nil {
		return store.Page{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Page{}, translate(ctx, op, err)
	}
	after, _ := p.After(true)
	now := s.now(ctx)
	walk, err := s.walking(ctx)
	if err != nil {
		return store.Page{}, translate(ctx, op, err)
	}
	if walk {
		page, err := s.listWalk(ctx, p, true, now)
		if err != nil {
			return store.Page{}, translate(ctx, op, err)
		}
		return page, nil
	}
	limit := p.EffectiveLimit() + 1
	var all []store.Record
	err = s.eachAge(ctx, func(age string) (bool, error) {
		tenant, ok := s.keys.tenantOfAge(age)
		if !ok {
			return true, nil
		}
		recs, _, err := s.listTenant(ctx, p, tenant, after, true, now, limit, math.MaxInt)
		all = append(all, recs...)
		return true, err
	})
	if err != nil {
		return store.Page{}, translate(ctx, op, err)
	}
	slices.SortFunc(all, func(a, b store.Record) int { return compareIn(p.Order, a, b, true) })
	// A tenant found twice (SCAN may return a key more than once) would
	// repeat its records.
	all = slices.CompactFunc(all, func(a, b store.Record) bool { return a.Tenant == b.Tenant && a.Key == b.Key })
	if len(all) > limit {
		all = all[:limit]
	}
	return pageOf(p, all, true), nil
}

// compareIn orders two records as a listing in order o does.
func compareIn(o store.Order, a, b store.Record, across bool) int {
	c := store.ComparePosition(store.PositionOf(a, across), store.PositionOf(b, across))
	if o == store.NewestFirst {
		return -c
	}
	return c
}

// pageOf cuts recs, up to limit+1 records in order, into a page.
func pageOf(p store.ListParams, recs []store.Record, across bool) store.Page {
	limit := p.EffectiveLimit()
	if len(recs) <= limit {
		return store.Page{Records: recs}
	}
	recs = recs[:limit]
	return store.Page{Records: recs, Next: store.PositionOf(recs[limit-1], across).Cursor(p, across)}
}

// listTenant returns up to want records of tenant that pass p's filters
// and come after the position after (when p has a cursor), in p's order.
// When it stops because it walked budget entries first, it also returns the
// position of the last entry walked.
// It walks the age index by score from the cursor's time (inclusive, since
// ties at that time are told apart by key), and remembers how many entries
// of the last score it has seen, so a run of equal scores never makes it
// read an entry twice.
func (s *Store) listTenant(ctx context.Context, p store.ListParams, tenant string, after store.ListPosition,
	across bool, now stamp, want, budget int) ([]store.Record, *store.ListPosition, error) {
	age := s.keys.ageKey(tenant)
	newest := p.Order == store.NewestFirst
	bound := math.Inf(1)
	if !newest {
		bound = math.Inf(-1)
	}
	if p.Cursor != "" {
		bound = float64(after.CreatedAt.UnixMicro())
	}
	skip := int64(0) // entries at score bound already read
	var (
		out    []store.Record
		walked int
		last   store.ListPosition
	)
	for {
		rng := redis.ZRangeArgs{Key: age, ByScore: true, Offset: skip, Count: listBatch}
		b := scoreArg(bound)
		if newest {
			rng.Start, rng.Stop, rng.Rev = b, "-inf", true
		} else {
			rng.Start, rng.Stop = b, "+inf"
		}
		entries, err := s.client.ZRangeArgsWithScores(ctx, rng).Result()
		if err != nil {
			return nil, nil, err
		}
		if len(entries) == 0 {
			return out, nil, nil
		}
		rks := make([]string, len(entries))
		for i, e := range entries {
			rks[i] = s.keys.recordKey(tenant, e.Member.(string))
		}
		fields, err := readAll(ctx, s.client, rks)
		if err != nil {
			return nil, nil, err
		}
		for i, e := range entries {
			if e.Score == bound {
				skip++
			} else {
				bound, skip = e.Score, 1
			}
			// An entry's position is its score and member, whatever its
			// record now says. Entries at or before the cursor (ties at its
			// instant) are passed over and not counted.
			pos := store.ListPosition{CreatedAt: stamp(int64(e.Score)).time(), Key: e.Member.(string)}
			if across {
				pos.Tenant = tenant
			}
			if p.Cursor != "" && !p.Order.Beyond(pos, after) {
				continue
			}
			if walked == budget {
				// Out of budget: continue after the last entry walked.
				return out, &last, nil
			}
			walked++
			last = pos
			m := fields[i]
			if m == nil {
				continue // released, freed or expired since the read
			}
			rec, err := parseRecord(tenant, e.Member.(string), m)
			if err != nil {
				return nil, nil, err
			}
			if rec.CreatedAt.UnixMicro() != int64(e.Score) {
				continue // claimed again since the read: listed at its new place
			}
			if !now.time().Before(rec.ExpiresAt) || !p.Keeps(rec, now.time()) {
				continue
			}
			out = append(out, rec)
			if len(out) == want {
				return out, nil, nil
			}
		}
		if len(entries) < listBatch {
			return out, nil, nil
		}
	}
}

// scoreArg spells a score bound for ZRANGE BYSCORE.
func scoreArg(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// readAll reads the records at keys, in either layout, in one pipeline
// (and a second for record hashes of the previous layout): their fields by
// name, nil for a key that holds none. A malformed record is an error.
func readAll(ctx context.Context, client redis.Cmdable, keys []string) ([]map[string]string, error) {
	out := make([]map[string]string, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	pipe := client.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	var hashes []int
	for i, g := range gets {
		v, err := g.Result()
		switch {
		case err == redis.Nil:
		case isWrongType(err):
			hashes = append(hashes, i)
		case err != nil:
			return nil, err
		default:
			m, err := unpack(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", keys[i], err)
			}
			out[i] = m
		}
	}
	if len(hashes) == 0 {
		return out, nil
	}
	pipe = client.Pipeline()
	hgets := make([]*redis.MapStringStringCmd, len(hashes))
	for j, i := range hashes {
		hgets[j] = pipe.HGetAll(ctx, keys[i])
	}
	_, _ = pipe.Exec(ctx)
	for j, i := range hashes {
		m, err := hgets[j].Result()
		if err != nil && err != redis.Nil && !isWrongType(err) {
			return nil, err
		}
		if len(m) > 0 {
			out[i] = m
		}
	}
	return out, nil
}

// CountBacklog implements [store.Store.CountBacklog]. It walks every
// record of the store (SCAN for the age indexes on every master, ZSCAN in
// batches, a pipelined GET per batch), as Sweep does, so run it on the
// sweeper's schedule, not per request.
func (s *Store) CountBacklog(ctx context.Context) ([]store.BacklogCount, error) {
	const op = "count backlog"
	if err := ctx.Err(); err != nil {
		return nil, translate(ctx, op, err)
	}
	now := s.now(ctx)
	counts := map[string]*store.BacklogCount{}
	walk, err := s.walking(ctx)
	switch {
	case err != nil:
	case walk:
		err = s.countWalk(ctx, now, counts)
	default:
		err = s.eachAge(ctx, func(age string) (bool, error) {
			return true, s.countIndex(ctx, age, now, counts)
		})
	}
	if err != nil {
		return nil, translate(ctx, op, err)
	}
	return store.SortBacklog(counts), nil
}

func (s *Store) countIndex(ctx context.Context, age string, now stamp, counts map[string]*store.BacklogCount) error {
	var cursor uint64
	for {
		flat, next, err := s.client.ZScan(ctx, age, cursor, "", 256).Result()
		if err != nil {
			return err
		}
		keys := make([]string, 0, len(flat)/2)
		for i := 0; i < len(flat); i += 2 { // member, score, ...
			keys = append(keys, recordKeyOfAge(age, flat[i]))
		}
		fields, err := readAll(ctx, s.client, keys)
		if err != nil {
			return err
		}
		tallyFields(fields, now, counts)
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// tallyFields adds to counts the records, read as their fields (nil for
// none), that wait for a person at now.
func tallyFields(fields []map[string]string, now stamp, counts map[string]*store.BacklogCount) {
	for _, m := range fields {
		state := m["state"]
		if state != "pending" && state != "indeterminate" {
			continue
		}
		e, err1 := strconv.ParseInt(m["exp"], 10, 64)
		l, err2 := strconv.ParseInt(m["lease"], 10, 64)
		if err1 != nil || err2 != nil || stamp(e) <= now {
			continue
		}
		st, _ := store.ParseState(state)
		rec := store.Record{State: st, LeaseUntil: stamp(l).time()}
		if origin := m["origin"]; origin != "" {
			_ = json.Unmarshal([]byte(origin), &rec.Origin)
		}
		store.Tally(counts, rec, now.time())
	}
}
