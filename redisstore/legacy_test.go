package redisstore

// The scripts of the previous layout (a record a hash, a tenant index set
// beside the age index), kept verbatim as test code: they write the records
// an earlier release left behind, which the current store must read,
// settle and migrate (legacyWriter).

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

// The scripts. Each is one server-side operation: Redis runs a script to the
// end before any other command, so a read followed by a write inside one is
// not a window another replica fits through.
//
// Conventions shared by all of them:
//   - Times are unix microseconds, computed by the client from the store's
//     clock (which follows Redis's own, see the package documentation) and
//     passed as decimal strings. Lua compares them with tonumber
//     (exact: they are far below 2^53). The one sum Lua makes is a record's
//     own retention window (legacyOwnWindow): now plus "ret", both integers
//     whose sum stays below 2^53, formatted back with %.0f, so it is exact
//     too.
//   - A record is live when its "exp" field is greater than ARGV now; a
//     record whose exp <= now is free, whether or not Redis has dropped it
//     yet.
//   - Tokens are compared as strings: int64 tokens do not fit a Lua number.
//   - PEXPIRE sets the physical expiry, relative to Redis's clock: the
//     logical remainder (exp - now) plus a margin, passed in as ttl_ms.
//   - A change that can end a Wait publishes the record's key on the store's
//     channel, but only when a Wait has registered on the record (field
//     "w", set by legacyWaitReadScript before it reads): a claim and complete
//     nobody waits on publish nothing. Forget always publishes.
//
// Record hash fields: state, holder, token, lease, exp, created, updated,
// outcome, reason, origin, resolution, check (the digest of the checked
// arguments), ret (the record's own retention window in microseconds; the
// store's TTL when absent), w, and sup (the token a takeover
// superseded, set only when it replaced a live pending record; see
// legacyUndoClaimScript).
//
// The age index (KEYS[3] where a script takes it) is the tenant's sorted
// set of record keys scored by "created": a claim adds the key, a release,
// a free resolution, Forget and Sweep remove it, and List pages through it.

// legacyExtendIndex is shared Lua: keep the tenant's index (KEYS[2]) and its
// age index (KEYS[3]) alive at least as long as the record just written.
// PTTL is -1 for a key without expiry and -2 for a missing one; both are
// below any positive ttl. An extension adds a minute of slack, so that the
// writes of the next minute find the indexes alive long enough and skip
// the PEXPIRE.
const legacyExtendIndex = `
local function extend_index(idx, ttl)
  local want = tonumber(ttl)
  if redis.call('PTTL', idx) < want then
    redis.call('PEXPIRE', idx, want + 60000)
  end
  if KEYS[3] and redis.call('PTTL', KEYS[3]) < want then
    redis.call('PEXPIRE', KEYS[3], want + 60000)
  end
end
`

// legacyOwnWindow is shared Lua: when the record KEYS[1] keeps a retention
// window of its own ("ret"), own_window returns the expiry of a write at
// now under it (never before floor), the record's physical TTL and its
// index's, in milliseconds, as extend_index wants them; otherwise exp, ttl
// and idx_ttl as the client computed them with the store's TTL.
var legacyOwnWindow = `
local function own_window(now, floor, exp, ttl, idx_ttl)
  local ret = redis.call('HGET', KEYS[1], 'ret')
  if not ret then return exp, ttl, idx_ttl end
  local n = tonumber(now)
  local e = n + tonumber(ret)
  if tonumber(floor) > e then e = tonumber(floor) end
  local ms = math.ceil((e - n) / 1000) + ` + strconv.FormatInt(physicalMargin.Milliseconds(), 10) + `
  local window = math.ceil(tonumber(ret) / 1000) + ` + strconv.FormatInt(physicalMargin.Milliseconds(), 10) + `
  return string.format('%.0f', e), string.format('%.0f', ms), string.format('%.0f', ms + window)
end
`

// legacyFencePrelude is shared Lua: holds is true when KEYS[1] is a live pending
// record held under ARGV[2] at ARGV[1], and its second result is true when
// a Wait has registered on the record.
const legacyFencePrelude = `
local function holds(rec, now, token)
  local cur = redis.call('HMGET', rec, 'state', 'exp', 'token', 'w')
  return cur[1] == 'pending' and tonumber(cur[2]) > tonumber(now) and cur[3] == token, cur[4]
end
`

// legacyClaimScript: KEYS rec, idx, age. ARGV now, holder, token, lease_until,
// exp, supersede ("0" for none), ttl_ms, member, channel, idx_ttl_ms,
// origin (JSON; "" for none), check ("" for none), ret (µs; "" for none).
// Returns {"acquired"}, or {state, HGETALL...} of the live record that
// stopped the claim. It reads the record with one HGETALL, which a fresh key
// answers with nothing and a conflict needs anyway.
//
// A live record pending under the claim's own token is this very claim,
// run again: go-redis sends a command once more when its answer was lost
// (a connection broken mid-reply), with the same arguments. It answers
// "acquired" again instead of reporting the key held by a stranger. Tokens
// are fresh per claim and never reused, so no other claim carries it.
//
// A takeover of a live pending record keeps the superseded token in the
// new record's "sup" field, so that undoing it (legacyUndoClaimScript) knows it
// replaced a record whose effect may have landed.
var legacyClaimScript = redis.NewScript(legacyExtendIndex + `
local now = tonumber(ARGV[1])
local rec = redis.call('HGETALL', KEYS[1])
local waited = false
local superseded = false
if #rec > 0 then
  local cur = {}
  for i = 1, #rec, 2 do cur[rec[i]] = rec[i + 1] end
  if tonumber(cur.exp) > now then
    if cur.state == 'pending' and cur.token == ARGV[3] then
      return {'acquired'}
    end
    if cur.state ~= 'pending' or ARGV[6] == '0' or cur.token ~= ARGV[6] then
      table.insert(rec, 1, cur.state)
      return rec
    end
    superseded = true
  end
  waited = cur.w
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'state', 'pending', 'holder', ARGV[2], 'token', ARGV[3],
  'lease', ARGV[4], 'exp', ARGV[5], 'created', ARGV[1], 'updated', ARGV[1])
if ARGV[11] ~= '' then
  redis.call('HSET', KEYS[1], 'origin', ARGV[11])
end
if ARGV[12] ~= '' then
  redis.call('HSET', KEYS[1], 'check', ARGV[12])
end
if ARGV[13] ~= '' then
  redis.call('HSET', KEYS[1], 'ret', ARGV[13])
end
if superseded then
  redis.call('HSET', KEYS[1], 'sup', ARGV[6])
end
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('SADD', KEYS[2], ARGV[8])
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[8])
extend_index(KEYS[2], ARGV[10])
if waited then
  redis.call('PUBLISH', ARGV[9], KEYS[1])
end
return {'acquired'}
`)

// legacyCompleteScript: KEYS rec, idx, age. ARGV now, token, exp, ttl_ms
// (by the store's TTL: see legacyOwnWindow), outcome, channel. Returns 1, or 0
// when the token does not hold the claim. It leaves the indexes alone: the
// claim or renewal that made the record it completes kept them alive a
// retention window (the record's) past the record (see indexTTL).
var legacyCompleteScript = redis.NewScript(legacyFencePrelude + legacyOwnWindow + `
local held, waited = holds(KEYS[1], ARGV[1], ARGV[2])
if not held then return 0 end
local exp, ttl = own_window(ARGV[1], ARGV[1], ARGV[3], ARGV[4], '0')
redis.call('HSET', KEYS[1], 'state', 'completed', 'outcome', ARGV[5], 'exp', exp, 'updated', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
if waited then
  redis.call('PUBLISH', ARGV[6], KEYS[1])
end
return 1
`)

// legacyMarkScript: KEYS rec, idx, age. ARGV now, token, exp, ttl_ms, reason, channel.
// Returns 1, or 0 when the token does not hold the claim.
var legacyMarkScript = redis.NewScript(legacyExtendIndex + legacyFencePrelude + `
local held, waited = holds(KEYS[1], ARGV[1], ARGV[2])
if not held then return 0 end
redis.call('HSET', KEYS[1], 'state', 'indeterminate', 'reason', ARGV[5], 'exp', ARGV[3], 'updated', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
extend_index(KEYS[2], ARGV[4])
extend_index(KEYS[3], ARGV[4])
if waited then
  redis.call('PUBLISH', ARGV[6], KEYS[1])
end
return 1
`)

// The legacy writer: what a worker of the previous release did, through its
// own scripts, for the tests of reading, settling and migrating its records.

// LegacyClaim claims key as the previous release did (a record hash, the
// tenant's index set and age index) and returns the claim's token; the
// claim must be acquired.
func LegacyClaim(t testing.TB, s *Store, tenant, key, holder string, lease time.Duration) int64 {
	t.Helper()
	ctx := context.Background()
	now := s.now(ctx)
	leaseUntil := now.add(lease)
	exp, ttl := s.expiry(now, leaseUntil)
	token := store.NewToken()
	v, err := legacyClaimScript.Run(ctx, s.client,
		[]string{s.keys.recordKey(tenant, key), s.keys.indexKey(tenant), s.keys.ageKey(tenant)},
		now.arg(), holder, strconv.FormatInt(token, 10), leaseUntil.arg(), exp.arg(), "0", ttl, key,
		s.notes.channel, s.indexTTL(ttl), "", "", "").Result()
	require.NoError(t, err)
	reply, _ := v.([]any)
	require.Equal(t, []any{"acquired"}, reply, "legacy claim of %q", key)
	return token
}

// LegacyComplete completes a claim as the previous release did.
func LegacyComplete(t testing.TB, s *Store, tenant, key string, token int64, outcome string) {
	t.Helper()
	ctx := context.Background()
	now := s.now(ctx)
	exp, ttl := s.expiry(now, now)
	n, err := legacyCompleteScript.Run(ctx, s.client,
		[]string{s.keys.recordKey(tenant, key), s.keys.indexKey(tenant), s.keys.ageKey(tenant)},
		now.arg(), strconv.FormatInt(token, 10), exp.arg(), ttl, outcome, s.notes.channel).Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "legacy complete of %q", key)
}

// LegacyMark marks a claim indeterminate as the previous release did.
func LegacyMark(t testing.TB, s *Store, tenant, key string, token int64, reason string) {
	t.Helper()
	ctx := context.Background()
	now := s.now(ctx)
	exp, ttl := s.expiry(now, stamp(store.NeverExpires.UnixMicro()))
	n, err := legacyMarkScript.Run(ctx, s.client,
		[]string{s.keys.recordKey(tenant, key), s.keys.indexKey(tenant), s.keys.ageKey(tenant)},
		now.arg(), strconv.FormatInt(token, 10), exp.arg(), ttl, reason, s.notes.channel).Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "legacy mark of %q", key)
}
