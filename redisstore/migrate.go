package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// MigrateParams bound one call of [Store.Migrate].
type MigrateParams struct {
	// Cursor resumes a migration where an earlier call's
	// [MigrateResult.Cursor] left it; "" starts from the beginning.
	Cursor string

	// Limit, when positive, makes the call return once it has converted at
	// least this many records (it finishes the SCAN batch it is in), with a
	// cursor to go on from. Zero runs to the end.
	Limit int
}

// MigrateResult is what one call of [Store.Migrate] did.
type MigrateResult struct {
	// Migrated is how many records the call converted.
	Migrated int
	// Cursor is where to resume; "" when the migration is done.
	Cursor string
}

// migratePhases are the SCAN passes of Migrate on each node: record hashes
// first, then the tenant index sets of the previous layout.
var migratePhases = [...]string{"hash", "set"}

// foldIndexScript: KEYS idx, age, rec1..recN. ARGV member1..memberN. Adds
// to the age index every record of the tenant index set (of the previous
// layout) that is missing there, scored by its claim time, keeps the age
// index alive as long as the set, and removes the members from the set
// (Redis deletes it once empty). Returns how many entries it added.
var foldIndexScript = redis.NewScript(recordLua + `
local ttl = redis.call('PTTL', KEYS[1])
local n = 0
for i = 3, #KEYS do
  local r = load_rec(KEYS[i])
  if r and set(r.created) then
    n = n + redis.call('ZADD', KEYS[2], 'NX', r.created, ARGV[i - 2])
  end
  redis.call('SREM', KEYS[1], ARGV[i - 2])
end
if ttl > 0 and n > 0 then extend_age(ttl) end
return n
`)

// Migrate converts what the previous layout left under the store's prefix:
// every record hash becomes the packed string (keeping its time to live,
// and joining the age index when it was missing there), and every tenant
// index set is folded into the age index and removed. It walks every
// master with SCAN ... TYPE, in batches; each batch is one script per
// record or index, so it is safe to run while workers use the store, and
// safe to run again (a record already packed is not touched). A call with
// MigrateParams.Limit returns a cursor to resume from; a cursor from
// before a change of the Cluster's masters may skip keys, so run it again
// from the beginning after one. Run it once after every worker runs this
// version (see docs/COMPATIBILITY.md); `idempotencyctl schema` does.
//
// Until it has run, the store still reads and settles records of the
// previous layout (each write converts the record it writes), but Sweep,
// CountBacklog and the listings see only the records in the age index.
func (s *Store) Migrate(ctx context.Context, p MigrateParams) (MigrateResult, error) {
	const op = "migrate"
	var res MigrateResult
	m := migrator{client: s.client, keys: s.keys}
	nodes, err := m.migrateNodes(ctx)
	if err != nil {
		return res, translate(ctx, op, err)
	}
	node, phase, cursor := 0, 0, uint64(0)
	if p.Cursor != "" {
		if node, phase, cursor, err = parseMigrateCursor(p.Cursor); err != nil {
			return res, fmt.Errorf("redisstore: %s: %w", op, err)
		}
	}
	for ; node < len(nodes); node, phase, cursor = node+1, 0, 0 {
		for ; phase < len(migratePhases); phase, cursor = phase+1, 0 {
			for {
				if err := ctx.Err(); err != nil {
					return res, translate(ctx, op, err)
				}
				keys, next, err := nodes[node].ScanType(ctx, cursor, s.keys.prefix+":{*}*", 256, migratePhases[phase]).Result()
				if err != nil {
					return res, translate(ctx, op, err)
				}
				n, err := m.migrateBatch(ctx, phase, keys)
				res.Migrated += n
				if err != nil {
					return res, translate(ctx, op, err)
				}
				if next == 0 {
					break
				}
				cursor = next
				if p.Limit > 0 && res.Migrated >= p.Limit {
					res.Cursor = fmt.Sprintf("%d:%d:%d", node, phase, cursor)
					return res, nil
				}
			}
		}
	}
	return res, nil
}

// migrator converts what the previous layout left under one prefix
// (Migrate).
type migrator struct {
	client redis.UniversalClient
	keys   layout
}

// migrateBatch converts the keys one SCAN of phase returned and returns
// how many records it converted.
func (m migrator) migrateBatch(ctx context.Context, phase int, keys []string) (int, error) {
	n := 0
	for _, k := range keys {
		if phase == 1 {
			if !m.keys.isTenantKey(k, indexSuffix) {
				continue
			}
			if err := m.foldIndex(ctx, k); err != nil {
				return n, err
			}
			continue
		}
		base, member, ok := m.keys.splitRecordKey(k)
		if !ok {
			continue
		}
		v, err := run(ctx, m.client, migrateScript, []string{k, base + ageSuffix}, migrateArgs{member: member}.params().argv()...)
		if err != nil {
			return n, err
		}
		if c, _ := v.(int64); c == 1 {
			n++
		}
	}
	return n, nil
}

// foldIndex folds the tenant index set idx into its age index.
func (m migrator) foldIndex(ctx context.Context, idx string) error {
	age := strings.TrimSuffix(idx, indexSuffix) + ageSuffix
	var cursor uint64
	for {
		members, next, err := m.client.SScan(ctx, idx, cursor, "", 256).Result()
		if err != nil {
			return err
		}
		if len(members) > 0 {
			keys := []string{idx, age}
			args := make([]any, 0, len(members))
			for _, m := range members {
				keys = append(keys, recordKeyOfAge(age, m))
				args = append(args, m)
			}
			if _, err := run(ctx, m.client, foldIndexScript, keys, args...); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// migrateNodes returns the masters in a stable order (by address), so that
// a cursor names the same node from one call to the next.
func (m migrator) migrateNodes(ctx context.Context) ([]redis.Cmdable, error) {
	nodes, err := masters(ctx, m.client)
	if err != nil {
		return nil, err
	}
	addr := func(c redis.Cmdable) string {
		if cl, ok := c.(*redis.Client); ok {
			return cl.Options().Addr
		}
		return ""
	}
	slices.SortFunc(nodes, func(a, b redis.Cmdable) int { return cmp.Compare(addr(a), addr(b)) })
	return nodes, nil
}

func parseMigrateCursor(c string) (node, phase int, cursor uint64, err error) {
	parts := strings.Split(c, ":")
	if len(parts) == 3 {
		node, err = strconv.Atoi(parts[0])
		if err == nil {
			phase, err = strconv.Atoi(parts[1])
		}
		if err == nil {
			cursor, err = strconv.ParseUint(parts[2], 10, 64)
		}
		if err == nil && node >= 0 && phase >= 0 && phase < len(migratePhases) {
			return node, phase, cursor, nil
		}
	}
	return 0, 0, 0, fmt.Errorf("malformed cursor %q", c)
}
