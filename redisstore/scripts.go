package redisstore

import (
	"strconv"

	"github.com/redis/go-redis/v9"
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
//     own retention window (ownWindow): now plus "ret", both integers
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
//     "w", set by waitReadScript before it reads): a claim and complete
//     nobody waits on publish nothing. Forget always publishes.
//
// Record hash fields: state, holder, token, lease, exp, created, updated,
// outcome, reason, origin, resolution, check (the digest of the checked
// arguments), ret (the record's own retention window in microseconds; the
// store's TTL when absent), w, and sup (the token a takeover
// superseded, set only when it replaced a live pending record; see
// undoClaimScript).
//
// The age index (KEYS[3] where a script takes it) is the tenant's sorted
// set of record keys scored by "created": a claim adds the key, a release,
// a free resolution, Forget and Sweep remove it, and List pages through it.

// extendIndex is shared Lua: keep the tenant's index (KEYS[2]) and its
// age index (KEYS[3]) alive at least as long as the record just written.
// PTTL is -1 for a key without expiry and -2 for a missing one; both are
// below any positive ttl. An extension adds a minute of slack, so that the
// writes of the next minute find the indexes alive long enough and skip
// the PEXPIRE.
const extendIndex = `
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

// ownWindow is shared Lua: when the record KEYS[1] keeps a retention
// window of its own ("ret"), own_window returns the expiry of a write at
// now under it (never before floor), the record's physical TTL and its
// index's, in milliseconds, as extend_index wants them; otherwise exp, ttl
// and idx_ttl as the client computed them with the store's TTL.
var ownWindow = `
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

// fencePrelude is shared Lua: holds is true when KEYS[1] is a live pending
// record held under ARGV[2] at ARGV[1], and its second result is true when
// a Wait has registered on the record.
const fencePrelude = `
local function holds(rec, now, token)
  local cur = redis.call('HMGET', rec, 'state', 'exp', 'token', 'w')
  return cur[1] == 'pending' and tonumber(cur[2]) > tonumber(now) and cur[3] == token, cur[4]
end
`

// claimScript: KEYS rec, idx, age. ARGV now, holder, token, lease_until,
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
// new record's "sup" field, so that undoing it (undoClaimScript) knows it
// replaced a record whose effect may have landed.
var claimScript = redis.NewScript(extendIndex + `
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

// renewScript: KEYS rec, idx, age. ARGV now, token, lease_until, exp,
// ttl_ms, idx_ttl_ms (by the store's TTL: see ownWindow).
// Returns 1, or 0 when the token does not hold the claim.
var renewScript = redis.NewScript(extendIndex + fencePrelude + ownWindow + `
if not holds(KEYS[1], ARGV[1], ARGV[2]) then return 0 end
local exp, ttl, idx_ttl = own_window(ARGV[1], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
redis.call('HSET', KEYS[1], 'lease', ARGV[3], 'exp', exp, 'updated', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
extend_index(KEYS[2], idx_ttl)
return 1
`)

// completeScript: KEYS rec, idx, age. ARGV now, token, exp, ttl_ms
// (by the store's TTL: see ownWindow), outcome, channel. Returns 1, or 0
// when the token does not hold the claim. It leaves the indexes alone: the
// claim or renewal that made the record it completes kept them alive a
// retention window (the record's) past the record (see indexTTL).
var completeScript = redis.NewScript(fencePrelude + ownWindow + `
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

// releaseScript: KEYS rec, idx, age. ARGV now, token, member, channel.
// Returns 1, or 0 when the token does not hold the claim.
var releaseScript = redis.NewScript(fencePrelude + `
local held, waited = holds(KEYS[1], ARGV[1], ARGV[2])
if not held then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[3])
if KEYS[3] then redis.call('ZREM', KEYS[3], ARGV[3]) end
if waited then
  redis.call('PUBLISH', ARGV[4], KEYS[1])
end
return 1
`)

// undoClaimScript takes back a claim whose fate was uncertain (its answer
// was lost, or too few replicas acknowledged it), removing only what the
// claim created (the rule of store.Store.Claim): a claim that took a free
// (or expired) key is deleted, with its index entries, as releaseScript
// does; a takeover of a live pending record ("sup" set) is left standing,
// pending, with its lease ended at now, so the key is never left free and
// the next claimer finds its holder presumed gone, as it would have found
// the record it replaced. A Wait registered on it is told.
//
// KEYS rec, idx, age. ARGV now, token, member, channel. Returns 1 when it
// deleted the claim, 2 when it ended a takeover's lease, 0 when the token
// holds no pending claim (the claim never ran, or was settled since).
var undoClaimScript = redis.NewScript(fencePrelude + `
local held, waited = holds(KEYS[1], ARGV[1], ARGV[2])
if not held then return 0 end
local result = 1
if redis.call('HEXISTS', KEYS[1], 'sup') == 1 then
  redis.call('HSET', KEYS[1], 'lease', ARGV[1], 'updated', ARGV[1])
  result = 2
else
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[3])
  if KEYS[3] then redis.call('ZREM', KEYS[3], ARGV[3]) end
end
if waited then
  redis.call('PUBLISH', ARGV[4], KEYS[1])
end
return result
`)

// markScript: KEYS rec, idx, age. ARGV now, token, exp, ttl_ms, reason, channel.
// Returns 1, or 0 when the token does not hold the claim.
var markScript = redis.NewScript(extendIndex + fencePrelude + `
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

// resolveScript: KEYS rec, idx, age. ARGV now, decision ("complete" or
// "free"), outcome, exp, ttl_ms, member, channel, token (the fence; "0" for
// none), resolution (JSON), record_if_gone ("1" or "0"), holder and token
// of a record made for record_if_gone, stale ("1" or "0": also settle the
// record pending under the fence whose lease ran out at now), then the
// check, ret, exp and ttl_ms of a record made for record_if_gone (check
// and ret "" for none; exp and ttl_ms by ret, else the TTL); a record that stands
// completes by its own window (ownWindow). Returns 1
// when applied, -1 when there is no live record (and record_if_gone is
// "0"), -2 when the record is not indeterminate (nor, with stale, pending),
// -3 when it stands under another token than the fence, -4 when, with
// stale, it is pending under the fence within its lease.
var resolveScript = redis.NewScript(extendIndex + ownWindow + `
local cur = redis.call('HMGET', KEYS[1], 'state', 'exp', 'w', 'token', 'lease')
if not cur[1] or tonumber(cur[2]) <= tonumber(ARGV[1]) then
  if ARGV[10] ~= '1' then return -1 end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'state', 'completed', 'holder', ARGV[11], 'token', ARGV[12],
    'lease', ARGV[1], 'exp', ARGV[16], 'created', ARGV[1], 'updated', ARGV[1],
    'outcome', ARGV[3], 'resolution', ARGV[9])
  if ARGV[14] ~= '' then
    redis.call('HSET', KEYS[1], 'check', ARGV[14])
  end
  if ARGV[15] ~= '' then
    redis.call('HSET', KEYS[1], 'ret', ARGV[15])
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[17])
  redis.call('SADD', KEYS[2], ARGV[6])
  redis.call('ZADD', KEYS[3], ARGV[1], ARGV[6])
  extend_index(KEYS[2], ARGV[17])
  if cur[3] then
    redis.call('PUBLISH', ARGV[7], KEYS[1])
  end
  return 1
end
if cur[1] == 'pending' and ARGV[13] == '1' then
  if cur[4] ~= ARGV[8] then return -3 end
  if tonumber(cur[5]) > tonumber(ARGV[1]) then return -4 end
elseif cur[1] ~= 'indeterminate' then
  return -2
end
if ARGV[8] ~= '0' and cur[4] ~= ARGV[8] then return -3 end
if ARGV[2] == 'free' then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[6])
  redis.call('ZREM', KEYS[3], ARGV[6])
else
  local exp, ttl = own_window(ARGV[1], ARGV[1], ARGV[4], ARGV[5], '0')
  redis.call('HSET', KEYS[1], 'state', 'completed', 'outcome', ARGV[3], 'exp', exp, 'updated', ARGV[1],
    'resolution', ARGV[9])
  redis.call('PEXPIRE', KEYS[1], ttl)
  extend_index(KEYS[2], ttl)
end
if cur[3] then
  redis.call('PUBLISH', ARGV[7], KEYS[1])
end
return 1
`)

// forgetScript: KEYS idx, age, rec1..recN. ARGV channel, member1..memberN.
// Deletes the records and their index entries; returns how many records
// existed.
var forgetScript = redis.NewScript(`
local n = 0
for i = 3, #KEYS do
  if redis.call('DEL', KEYS[i]) == 1 then
    n = n + 1
    redis.call('PUBLISH', ARGV[1], KEYS[i])
  end
  redis.call('SREM', KEYS[1], ARGV[i - 1])
  redis.call('ZREM', KEYS[2], ARGV[i - 1])
end
return n
`)

// sweepScript: KEYS idx, age, rec1..recN. ARGV now, limit,
// member1..memberN. Deletes up to limit records whose exp <= now, drops
// index entries whose record is gone, and returns how many records it
// deleted.
var sweepScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local n = 0
for i = 3, #KEYS do
  local exp = redis.call('HGET', KEYS[i], 'exp')
  if not exp then
    redis.call('SREM', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i])
  elseif n < limit and tonumber(exp) <= now then
    redis.call('DEL', KEYS[i])
    redis.call('SREM', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i])
    n = n + 1
  end
end
return n
`)

// waitReadScript: KEYS rec. Registers a Wait on a pending record (field "w",
// so that the scripts that end the claim publish the change) and returns
// the record's HGETALL, empty when there is none. The caller is subscribed
// before it runs the script, so a change after it is published and one
// before it is in the reply.
var waitReadScript = redis.NewScript(`
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {} end
if state == 'pending' then
  redis.call('HSET', KEYS[1], 'w', '1')
end
return redis.call('HGETALL', KEYS[1])
`)
