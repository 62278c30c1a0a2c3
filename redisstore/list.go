package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tesserix/idempotency/store"
)

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
		page, err := s.walker.listWalk(ctx, p, false, now)
		if err != nil {
			return store.Page{}, translate(ctx, op, err)
		}
		return page, nil
	}
	recs, walked, err := s.ages.listTenant(ctx, p, p.Tenant, after, false, now, p.EffectiveLimit()+1, s.listBudget)
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
		page, err := s.walker.listWalk(ctx, p, true, now)
		if err != nil {
			return store.Page{}, translate(ctx, op, err)
		}
		return page, nil
	}
	limit := p.EffectiveLimit() + 1
	var all []store.Record
	err = s.ages.eachAge(ctx, func(age string) (bool, error) {
		tenant, ok := s.keys.tenantOfAge(age)
		if !ok {
			return true, nil
		}
		recs, _, err := s.ages.listTenant(ctx, p, tenant, after, true, now, limit, math.MaxInt)
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
		err = s.walker.countWalk(ctx, now, counts)
	default:
		err = s.ages.eachAge(ctx, func(age string) (bool, error) {
			return true, s.ages.countIndex(ctx, age, now, counts)
		})
	}
	if err != nil {
		return nil, translate(ctx, op, err)
	}
	return store.SortBacklog(counts), nil
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
