package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/store"
)

// Walking the record keys.
//
// With Options.IndexOnlyWhatWaits a claim of a free key writes its record
// and nothing else: no age index lists it until something makes it an
// operator's business (a renewal, a mark, a takeover). A listing, a count
// or a sweep that read the age indexes alone would miss those records,
// the pending ones among them, whose calls may be running: idempotencyctl
// forget, which refuses while a record is held, found none and erased a
// running claim (issue 43). So a Store with the option sets P:unindexed
// before its first claim that leaves a record out of the index
// (markUnindexed), and every Store on the prefix that finds that key (with
// the option or without it, in any process, the operator's command
// included) lists, counts and sweeps by walking the record keys themselves
// (SCAN on every master), which finds every record whatever the indexes
// hold. The key is never removed by the store.

// recordWalker lists, counts and sweeps the records of one prefix by
// walking the record keys themselves.
type recordWalker struct {
	client redis.UniversalClient
	keys   layout
}

// walkCount is the COUNT hint of the SCANs that walk the record keys.
const walkCount = 1000

// markEvery is how long a Store with Options.IndexOnlyWhatWaits trusts
// its last write of the marker: it writes it again on its first claim
// after, so a marker lost (a failover before it replicated, a DEL by hand
// while workers run) comes back within it.
const markEvery = time.Minute

// markUnindexed makes sure P:unindexed exists before a claim at now leaves
// its record out of the age index: it writes the key when this Store has
// not written it within markEvery. With ReplicaAcks the write waits for as
// many replicas as a claim does, and fails with ErrNotReplicated when too
// few acknowledge it; the claim is then not made.
func (s *Store) markUnindexed(ctx context.Context, now stamp) error {
	if int64(now) < s.markedUntil.Load() {
		return nil
	}
	key := s.keys.unindexedKey()
	const value = "records of this prefix are in no age index: list by walking the record keys"
	if s.replicaAcks == 0 {
		if err := s.client.Set(ctx, key, value, 0).Err(); err != nil {
			refreshTopology(ctx, s.client, err)
			return err
		}
	} else {
		node, err := nodeFor(ctx, s.client, key)
		if err != nil {
			return err
		}
		pipe := node.Pipeline()
		set := pipe.Set(ctx, key, value, 0)
		wait := pipe.Do(ctx, "wait", s.replicaAcks, s.replicaAckTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if err := set.Err(); err != nil {
			return nodeError(ctx, s.client, err)
		}
		acks, werr := wait.Int64()
		switch {
		case werr != nil:
			return fmt.Errorf("%w: WAIT after marking the prefix unindexed: %w", ErrNotReplicated, werr)
		case acks < int64(s.replicaAcks):
			return fmt.Errorf("%w: marking the prefix unindexed: %d of %d within %v", ErrNotReplicated, acks, s.replicaAcks, s.replicaAckTimeout)
		}
	}
	s.markedUntil.Store(int64(now.add(markEvery)))
	return nil
}

// walking reports whether the listings, counts and sweeps of the prefix
// must walk the record keys: whether P:unindexed exists.
func (s *Store) walking(ctx context.Context) (bool, error) {
	n, err := s.client.Exists(ctx, s.keys.unindexedKey()).Result()
	if err != nil {
		refreshTopology(ctx, s.client, err)
		return false, err
	}
	return n > 0, nil
}

// eachRecordKey calls f with every batch of keys matching pattern, found
// with SCAN on every master. A key may come more than once (SCAN's own
// rule, while Redis rehashes).
func (w recordWalker) eachRecordKey(ctx context.Context, pattern string, f func(keys []string) error) error {
	nodes, err := masters(ctx, w.client)
	if err != nil {
		return err
	}
	for _, node := range nodes {
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, pattern, walkCount).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				if err := f(keys); err != nil {
					return err
				}
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return nil
}

// ListByScan is [Store.List] that walks the tenant's record keys (SCAN on
// every master) instead of its age index, whatever the prefix holds: it
// finds every live record of the tenant, whether or not an index lists it
// (a claim of [Options.IndexOnlyWhatWaits], a record of the previous
// layout Migrate has not indexed, an index entry lost). Each page costs a
// walk of the keyspace. List does the same by itself once a Store with
// IndexOnlyWhatWaits has claimed on the prefix; idempotencyctl forget
// looks for held records with it, trusting no index.
func (s *Store) ListByScan(ctx context.Context, p store.ListParams) (store.Page, error) {
	const op = "list by scan"
	if err := p.Validate(); err != nil {
		return store.Page{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Page{}, translate(ctx, op, err)
	}
	page, err := s.walker.listWalk(ctx, p, false, s.now(ctx))
	if err != nil {
		return store.Page{}, translate(ctx, op, err)
	}
	return page, nil
}

// listWalk is a listing of p (of every tenant when across) read from the
// record keys: it reads every record the pattern matches, keeps the live
// ones that pass the filters and come after the cursor, and returns the
// first page of them in p's order. Unlike the index walk it cannot stop
// early: the page's records may be anywhere in the keyspace.
func (w recordWalker) listWalk(ctx context.Context, p store.ListParams, across bool, now stamp) (store.Page, error) {
	after, _ := p.After(across) // Validated by the caller.
	want := p.EffectiveLimit() + 1
	var top []store.Record
	// trim sorts top, keeps one record per key (a key SCAN returned
	// twice, perhaps claimed again between the two reads) and cuts it to
	// want.
	trim := func() {
		slices.SortFunc(top, func(a, b store.Record) int { return compareIn(p.Order, a, b, across) })
		seen := make(map[[2]string]struct{}, len(top))
		kept := top[:0]
		for _, r := range top {
			id := [2]string{r.Tenant, r.Key}
			if _, dup := seen[id]; dup {
				continue
			}
			seen[id] = struct{}{}
			kept = append(kept, r)
		}
		top = kept[:min(len(kept), want)]
	}
	err := w.eachRecordKey(ctx, w.keys.recordPattern(p.Tenant, across), func(keys []string) error {
		fields, err := readAll(ctx, w.client, keys)
		if err != nil {
			return err
		}
		for i, m := range fields {
			if m == nil {
				continue // released, freed or expired since the SCAN
			}
			tenant, key, ok := w.keys.parseRecordKey(keys[i])
			if !ok || (!across && tenant != p.Tenant) {
				continue
			}
			rec, err := parseRecord(tenant, key, m)
			if err != nil {
				return err
			}
			if !now.time().Before(rec.ExpiresAt) || !p.Keeps(rec, now.time()) {
				continue
			}
			if p.Cursor != "" && !p.Order.Beyond(store.PositionOf(rec, across), after) {
				continue
			}
			top = append(top, rec)
		}
		if len(top) >= 2*want+walkCount {
			trim()
		}
		return nil
	})
	if err != nil {
		return store.Page{}, err
	}
	trim()
	return pageOf(p, top, across), nil
}

// countWalk is CountBacklog read from the record keys.
func (w recordWalker) countWalk(ctx context.Context, now stamp, counts map[string]*store.BacklogCount) error {
	return w.eachRecordKey(ctx, w.keys.recordPattern("", true), func(keys []string) error {
		fields, err := readAll(ctx, w.client, keys)
		if err != nil {
			return err
		}
		tallyFields(fields, now, counts)
		return nil
	})
}

// errSwept stops a walk once a sweep has deleted its limit.
var errSwept = errors.New("swept the limit")

// sweepWalk deletes up to limit records expired at now found by walking
// the record keys: a pipelined read of each batch picks the expired ones,
// and sweepScript, per tenant, deletes those still expired when it runs.
func (w recordWalker) sweepWalk(ctx context.Context, now stamp, limit int) (int, error) {
	deleted := 0
	err := w.eachRecordKey(ctx, w.keys.recordPattern("", true), func(keys []string) error {
		fields, err := readAll(ctx, w.client, keys)
		if err != nil {
			return err
		}
		expired := map[string][]string{} // tenant -> keys
		var tenants []string
		for i, m := range fields {
			if m == nil {
				continue
			}
			if e, err := strconv.ParseInt(m["exp"], 10, 64); err != nil || stamp(e) > now {
				continue
			}
			tenant, key, ok := w.keys.parseRecordKey(keys[i])
			if !ok {
				continue
			}
			if _, ok := expired[tenant]; !ok {
				tenants = append(tenants, tenant)
			}
			expired[tenant] = append(expired[tenant], key)
		}
		for _, tenant := range tenants {
			n, err := sweepMembers(ctx, w.client, w.keys.ageKey(tenant), expired[tenant], now, limit-deleted)
			deleted += n
			if err != nil {
				return err
			}
			if deleted >= limit {
				return errSwept
			}
		}
		return nil
	})
	if errors.Is(err, errSwept) {
		err = nil
	}
	return deleted, err
}
