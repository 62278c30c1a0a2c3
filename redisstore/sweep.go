package redisstore

import (
	"context"
	"strings"

	"github.com/tesserix/idempotency/store"
)

// Erasing records: Forget (every record of a tenant) and Sweep (the
// expired records of every tenant), through the age indexes (index.go)
// and, for the records no index lists, the record keys themselves.

// Forget implements [store.Store.Forget]: it takes the tenant's keys from
// its age index (and from the index set of the previous layout, until
// Migrate has removed it) in batches and deletes each batch, with its
// index entries, in one script, then deletes the records no index names
// (forgetUnindexed), which scans the tenant's record keys.
func (s *Store) Forget(ctx context.Context, p store.ForgetParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	const batch = 256
	age, idx := s.keys.ageKey(p.Tenant), s.keys.indexKey(p.Tenant)
	pub, channel := s.notes.publisher(ctx, p.Tenant)
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, translate(ctx, "forget", err)
		}
		members, err := s.client.ZRange(ctx, age, 0, batch-1).Result()
		if err != nil {
			return total, translate(ctx, "forget", err)
		}
		if len(members) == 0 {
			if members, err = s.client.SRandMemberN(ctx, idx, batch).Result(); err != nil {
				return total, translate(ctx, "forget", err)
			}
		}
		if len(members) == 0 {
			n, err := s.forgetUnindexed(ctx, p.Tenant)
			return total + n, err
		}
		keys := make([]string, 2, len(members)+2)
		keys[0], keys[1] = age, idx
		for _, m := range members {
			keys = append(keys, recordKeyOfAge(age, m))
		}
		a := membersArgs{head: announce{pubcmd: pub, channel: channel}.params(), members: members}
		v, err := run(ctx, s.client, forgetScript, keys, a.argv()...)
		if err != nil {
			return total, translate(ctx, "forget", err)
		}
		n, _ := v.(int64)
		total += int(n)
	}
}

// Sweep implements [store.Store.Sweep]: it finds the age indexes with SCAN
// (on every master of a Cluster), walks each with ZSCAN in batches, and
// deletes records expired by the store's clock, up to the limit. Index
// entries whose record Redis already expired are dropped on the way. Once
// a Store with Options.IndexOnlyWhatWaits has claimed on the prefix
// (P:unindexed exists), it then walks the record keys too, for the
// expired records no index lists (walk.go).
func (s *Store) Sweep(ctx context.Context, p store.SweepParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	limit := p.EffectiveLimit()
	now := s.now(ctx)
	deleted := 0
	err := s.ages.eachAge(ctx, func(age string) (bool, error) {
		n, err := s.ages.sweepIndex(ctx, age, now, limit-deleted)
		deleted += n
		return deleted < limit, err
	})
	if err != nil {
		return deleted, translate(ctx, "sweep", err)
	}
	if deleted >= limit {
		return deleted, nil
	}
	walk, err := s.walking(ctx)
	if err != nil || !walk {
		return deleted, translate(ctx, "sweep", err)
	}
	n, err := s.walker.sweepWalk(ctx, now, limit-deleted)
	return deleted + n, translate(ctx, "sweep", err)
}

// forgetUnindexed deletes the tenant's records that no index names (an
// index entry lost, a record written around the indexes): a SCAN of the
// tenant's record keys on every master, once the indexes are empty, so
// that Forget leaves nothing of the tenant whatever state its keys are in.
func (s *Store) forgetUnindexed(ctx context.Context, tenant string) (int, error) {
	nodes, err := masters(ctx, s.client)
	if err != nil {
		return 0, translate(ctx, "forget", err)
	}
	base := s.keys.tenantBase(tenant)
	pattern := globEscaper.Replace(base+recordInfix) + "*"
	age := s.keys.ageKey(tenant)
	pub, channel := s.notes.publisher(ctx, tenant)
	total := 0
	for _, node := range nodes {
		var cursor uint64
		for {
			found, next, err := node.Scan(ctx, cursor, pattern, 256).Result()
			if err != nil {
				return total, translate(ctx, "forget", err)
			}
			if len(found) > 0 {
				keys := []string{age, s.keys.indexKey(tenant)}
				a := membersArgs{head: announce{pubcmd: pub, channel: channel}.params()}
				for _, k := range found {
					keys = append(keys, k)
					a.members = append(a.members, strings.TrimPrefix(k, base+recordInfix))
				}
				v, err := run(ctx, s.client, forgetScript, keys, a.argv()...)
				if err != nil {
					return total, translate(ctx, "forget", err)
				}
				n, _ := v.(int64)
				total += int(n)
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return total, nil
}

// globEscaper escapes what SCAN's MATCH reads as a pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
