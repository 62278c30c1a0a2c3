package redisstore

import (
	"context"
	"math"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/store"
)

// The age indexes: one sorted set per tenant of its record keys by claim
// time (keys.go). Listings page through them, Sweep and CountBacklog walk
// all of them, Forget empties one.

// ageIndexes reads and prunes the age indexes of one prefix.
type ageIndexes struct {
	client redis.UniversalClient
	keys   layout
}

// eachAge calls f with every age index of the store, found with SCAN on
// every master, until f returns false or an error.
func (a ageIndexes) eachAge(ctx context.Context, f func(age string) (bool, error)) error {
	nodes, err := masters(ctx, a.client)
	if err != nil {
		return err
	}
	for _, node := range nodes {
		var cursor uint64
		for {
			ages, next, err := node.Scan(ctx, cursor, a.keys.agePattern(), 256).Result()
			if err != nil {
				return err
			}
			for _, age := range ages {
				if !a.keys.isTenantKey(age, ageSuffix) {
					continue
				}
				more, err := f(age)
				if err != nil || !more {
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

// sweepIndex deletes up to limit of the records the age index age lists
// that are expired at now, and returns how many it deleted.
func (a ageIndexes) sweepIndex(ctx context.Context, age string, now stamp, limit int) (int, error) {
	deleted := 0
	var cursor uint64
	for {
		flat, next, err := a.client.ZScan(ctx, age, cursor, "", 256).Result()
		if err != nil {
			return deleted, err
		}
		if len(flat) > 0 {
			members := make([]string, 0, len(flat)/2)
			for i := 0; i < len(flat); i += 2 { // member, score, ...
				members = append(members, flat[i])
			}
			n, err := sweepMembers(ctx, a.client, age, members, now, limit-deleted)
			deleted += n
			if err != nil {
				return deleted, err
			}
			if deleted >= limit {
				return deleted, nil
			}
		}
		if next == 0 {
			return deleted, nil
		}
		cursor = next
	}
}

// sweepMembers runs sweepScript on members of the tenant whose age index
// is age: it deletes up to limit of their records expired at now, drops
// the index entries of those gone, and returns how many it deleted.
func sweepMembers(ctx context.Context, client redis.UniversalClient, age string, members []string, now stamp, limit int) (int, error) {
	keys := make([]string, 2, len(members)+2)
	keys[0], keys[1] = age, indexKeyOfAge(age)
	for _, m := range members {
		keys = append(keys, recordKeyOfAge(age, m))
	}
	a := membersArgs{head: sweepHead{now: now.arg(), limit: strconv.Itoa(limit)}.params(), members: members}
	v, err := run(ctx, client, sweepScript, keys, a.argv()...)
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return int(n), nil
}

// listBatch is how many entries of an age index one round trip reads.
const listBatch = 256

// listTenant returns up to want records of tenant that pass p's filters
// and come after the position after (when p has a cursor), in p's order.
// When it stops because it walked budget entries first, it also returns the
// position of the last entry walked.
// It walks the age index by score from the cursor's time (inclusive, since
// ties at that time are told apart by key), and remembers how many entries
// of the last score it has seen, so a run of equal scores never makes it
// read an entry twice.
func (a ageIndexes) listTenant(ctx context.Context, p store.ListParams, tenant string, after store.ListPosition,
	across bool, now stamp, want, budget int) ([]store.Record, *store.ListPosition, error) {
	age := a.keys.ageKey(tenant)
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
		entries, err := a.client.ZRangeArgsWithScores(ctx, rng).Result()
		if err != nil {
			return nil, nil, err
		}
		if len(entries) == 0 {
			return out, nil, nil
		}
		rks := make([]string, len(entries))
		for i, e := range entries {
			rks[i] = a.keys.recordKey(tenant, e.Member.(string))
		}
		fields, err := readAll(ctx, a.client, rks)
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

// countIndex adds to counts the records the age index age lists that
// wait for a person at now.
func (a ageIndexes) countIndex(ctx context.Context, age string, now stamp, counts map[string]*store.BacklogCount) error {
	var cursor uint64
	for {
		flat, next, err := a.client.ZScan(ctx, age, cursor, "", 256).Result()
		if err != nil {
			return err
		}
		keys := make([]string, 0, len(flat)/2)
		for i := 0; i < len(flat); i += 2 { // member, score, ...
			keys = append(keys, recordKeyOfAge(age, flat[i]))
		}
		fields, err := readAll(ctx, a.client, keys)
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
