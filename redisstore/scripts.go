package redisstore

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The scripts. Each is one server-side operation: Redis runs a script to the
// end before any other command, so a read followed by a write inside one is
// not a window another replica fits through. The claim of a free key runs
// no script at all (see Store.Claim): the scripts are its uncommon paths
// (a takeover, an expired record still in Redis, a record of the previous
// layout) and the writes that follow a claim.
//
// Conventions shared by all of them:
//   - A record is one string in the packed layout (see record.go and the
//     package documentation); load_rec also reads a record hash of the
//     previous layout, and every write stores the packed string, so any
//     write converts a record.
//   - Times are unix microseconds, computed by the client from the store's
//     clock (which follows Redis's own, see the package documentation) and
//     passed as decimal strings. Lua compares them with tonumber
//     (exact: they are far below 2^53). The one sum Lua makes is a record's
//     own retention window (own_window): now plus "ret", both integers
//     whose sum stays below 2^53, formatted back with %.0f, so it is exact
//     too.
//   - A record is live when its exp is greater than now; a record whose
//     exp <= now is free, whether or not Redis has dropped it yet.
//   - Tokens are compared as strings: int64 tokens do not fit a Lua number.
//   - SET ... PX sets the physical expiry, relative to Redis's clock: the
//     logical remainder (exp - now) plus a margin, passed in as ttl_ms.
//   - ARGV[1] and ARGV[2] of every script that may announce a change are
//     the publish command (PUBLISH, or SPUBLISH on a Cluster that has
//     sharded pub/sub) and the channel. A change that can end a Wait
//     publishes the record's key, but only when a Wait has registered on
//     the record (w, set by waitReadScript before it reads): a claim and
//     complete nobody waits on publish nothing. Forget always publishes.
//
// The age index (KEYS[2] where a script takes it) is the tenant's sorted
// set of record keys scored by "created": a claim adds the key, a release,
// a free resolution, Forget and Sweep remove it, and List, Sweep, Forget
// and CountBacklog walk it.

// recordLua is shared Lua: the packed record layout (pack_rec, unpack_rec,
// the same as pack and unpack in record.go), load_rec, which reads either
// layout into a table (nil when there is no record), publish and
// extend_age.
//
// extend_age keeps the age index (KEYS[2]) alive at least ttl
// milliseconds. PTTL is -1 for a key without expiry and -2 for a missing
// one; both are below any positive ttl. An extension adds a minute of
// slack, so that the writes of the next minute find the index alive long
// enough and skip the PEXPIRE.
const recordLua = `
local HDR = {'state', 'token', 'lease', 'exp', 'updated', 'created', 'ret', 'sup', 'w'}
local VAR = {'holder', 'check', 'origin', 'outcome', 'reason', 'resolution'}
local function unpack_rec(s)
  local r = {}
  local pos = 3
  for i = 1, #HDR do
    local j = string.find(s, '|', pos, true)
    r[HDR[i]] = string.sub(s, pos, j - 1)
    pos = j + 1
  end
  for i = 1, #VAR do
    local j = string.find(s, ':', pos, true)
    local n = tonumber(string.sub(s, pos, j - 1))
    r[VAR[i]] = string.sub(s, j + 1, j + n)
    pos = j + n + 1
  end
  return r
end
local function pack_rec(r)
  local out = {'` + packVersion + `'}
  for i = 1, #HDR do out[#out + 1] = r[HDR[i]] or '' end
  out[#out + 1] = ''
  local s = table.concat(out, '|')
  local v = {}
  for i = 1, #VAR do
    local x = r[VAR[i]] or ''
    v[#v + 1] = #x .. ':' .. x
  end
  return s .. table.concat(v)
end
local function load_rec(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    local flat = redis.call('HGETALL', key)
    if #flat == 0 then return nil end
    local r = {}
    for i = 1, #flat, 2 do r[flat[i]] = flat[i + 1] end
    return r
  end
  if not v then return nil end
  return unpack_rec(v)
end
local function set(s)
  return s and s ~= ''
end
local function publish()
  redis.call(ARGV[1], ARGV[2], KEYS[1])
end
local function extend_age(ttl)
  local want = tonumber(ttl)
  if redis.call('PTTL', KEYS[2]) < want then
    redis.call('PEXPIRE', KEYS[2], want + 60000)
  end
end
`

// ownWindow is shared Lua: when the record r keeps a retention window of
// its own (ret), own_window returns the expiry of a write at now under it
// (never before floor), the record's physical TTL and its index's, in
// milliseconds, as extend_age wants them; otherwise exp, ttl and idx_ttl
// as the client computed them with the store's TTL.
var ownWindow = `
local function own_window(r, now, floor, exp, ttl, idx_ttl)
  if not set(r.ret) then return exp, ttl, idx_ttl end
  local n = tonumber(now)
  local e = n + tonumber(r.ret)
  if tonumber(floor) > e then e = tonumber(floor) end
  local ms = math.ceil((e - n) / 1000) + ` + strconv.FormatInt(physicalMargin.Milliseconds(), 10) + `
  local window = math.ceil(tonumber(r.ret) / 1000) + ` + strconv.FormatInt(physicalMargin.Milliseconds(), 10) + `
  return string.format('%.0f', e), string.format('%.0f', ms), string.format('%.0f', ms + window)
end
`

// fencePrelude is shared Lua: holds is true when r is a live pending
// record held under token at now.
const fencePrelude = `
local function holds(r, now, token)
  return r ~= nil and r.state == 'pending' and tonumber(r.exp) > tonumber(now) and r.token == token
end
`

// claimScript is the claim's uncommon path, which Store.Claim runs when
// its SET NX found a record it cannot answer from: an expired one still
// in Redis, a takeover's, its own (the claim sent again after a lost
// answer) or a record of the previous layout.
//
// KEYS rec, age. ARGV pubcmd, channel, now, holder, token, lease_until,
// exp, supersede ("0" for none), ttl_ms, member, age_ttl_ms, origin (JSON;
// "" for none), check ("" for none), ret (µs; "" for none).
// Returns {"acquired"}, or {"held", packed} with the live record that
// stopped the claim.
//
// A live record pending under the claim's own token is this very claim,
// run again: go-redis sends a command once more when its answer was lost
// (a connection broken mid-reply), with the same arguments. It answers
// "acquired" again instead of reporting the key held by a stranger. Tokens
// are fresh per claim and never reused, so no other claim carries it.
//
// A takeover of a live pending record keeps the superseded token in the
// new record's sup, so that undoing it (undoClaimScript) knows it replaced
// a record whose effect may have landed.
var claimScript = redis.NewScript(recordLua + `
local now = tonumber(ARGV[3])
local cur = load_rec(KEYS[1])
local sup = ''
if cur then
  if tonumber(cur.exp) > now then
    if cur.state == 'pending' and cur.token == ARGV[5] then
      return {'acquired'}
    end
    if cur.state ~= 'pending' or ARGV[8] == '0' or cur.token ~= ARGV[8] then
      if set(cur.created) then
        -- The MULTI before this script may have listed the key at now.
        redis.call('ZADD', KEYS[2], 'XX', cur.created, ARGV[10])
      end
      return {'held', pack_rec(cur)}
    end
    sup = ARGV[8]
  end
end
redis.call('SET', KEYS[1], pack_rec({state = 'pending', token = ARGV[5], lease = ARGV[6], exp = ARGV[7],
  updated = ARGV[3], created = ARGV[3], ret = ARGV[14], sup = sup, holder = ARGV[4], check = ARGV[13],
  origin = ARGV[12]}), 'PX', ARGV[9])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[10])
extend_age(ARGV[11])
if cur and cur.w == '1' then publish() end
return {'acquired'}
`)

// renewScript: KEYS rec, age. ARGV pubcmd, channel, now, token,
// lease_until, exp, ttl_ms, age_ttl_ms (by the store's TTL: see
// ownWindow). Returns 1, or 0 when the token does not hold the claim.
var renewScript = redis.NewScript(recordLua + fencePrelude + ownWindow + `
local r = load_rec(KEYS[1])
if not holds(r, ARGV[3], ARGV[4]) then return 0 end
local exp, ttl, idx_ttl = own_window(r, ARGV[3], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
r.lease = ARGV[5]
r.exp = exp
r.updated = ARGV[3]
redis.call('SET', KEYS[1], pack_rec(r), 'PX', ttl)
extend_age(idx_ttl)
return 1
`)

// completeScript: KEYS rec, age. ARGV pubcmd, channel, now, token, exp,
// ttl_ms (by the store's TTL: see ownWindow), outcome. Returns 1, or 0
// when the token does not hold the claim. It leaves the age index alone:
// the claim or renewal that made the record it completes kept it alive a
// retention window (the record's) past the record (see indexTTL).
var completeScript = redis.NewScript(recordLua + fencePrelude + ownWindow + `
local r = load_rec(KEYS[1])
if not holds(r, ARGV[3], ARGV[4]) then return 0 end
local exp, ttl = own_window(r, ARGV[3], ARGV[3], ARGV[5], ARGV[6], '0')
r.state = 'completed'
r.outcome = ARGV[7]
r.exp = exp
r.updated = ARGV[3]
redis.call('SET', KEYS[1], pack_rec(r), 'PX', ttl)
if r.w == '1' then publish() end
return 1
`)

// releaseScript: KEYS rec, age. ARGV pubcmd, channel, now, token, member.
// Returns 1, or 0 when the token does not hold the claim.
var releaseScript = redis.NewScript(recordLua + fencePrelude + `
local r = load_rec(KEYS[1])
if not holds(r, ARGV[3], ARGV[4]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[5])
if r.w == '1' then publish() end
return 1
`)

// undoClaimScript takes back a claim whose fate was uncertain (its answer
// was lost, or too few replicas acknowledged it), removing only what the
// claim created (the rule of store.Store.Claim): a claim that took a free
// (or expired) key is deleted, with its index entry, as releaseScript
// does; a takeover of a live pending record (sup set) is left standing,
// pending, with its lease ended at now, so the key is never left free and
// the next claimer finds its holder presumed gone, as it would have found
// the record it replaced. A Wait registered on it is told.
//
// KEYS rec, age. ARGV pubcmd, channel, now, token, member. Returns 1 when
// it deleted the claim, 2 when it ended a takeover's lease, 0 when the
// token holds no pending claim (the claim never ran, or was settled since).
var undoClaimScript = redis.NewScript(recordLua + fencePrelude + `
local r = load_rec(KEYS[1])
if not holds(r, ARGV[3], ARGV[4]) then return 0 end
local result = 1
if set(r.sup) then
  r.lease = ARGV[3]
  r.updated = ARGV[3]
  redis.call('SET', KEYS[1], pack_rec(r), 'KEEPTTL')
  result = 2
else
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[5])
end
if r.w == '1' then publish() end
return result
`)

// markScript: KEYS rec, age. ARGV pubcmd, channel, now, token, exp,
// ttl_ms, reason. Returns 1, or 0 when the token does not hold the claim.
var markScript = redis.NewScript(recordLua + fencePrelude + `
local r = load_rec(KEYS[1])
if not holds(r, ARGV[3], ARGV[4]) then return 0 end
r.state = 'indeterminate'
r.reason = ARGV[7]
r.exp = ARGV[5]
r.updated = ARGV[3]
redis.call('SET', KEYS[1], pack_rec(r), 'PX', ARGV[6])
extend_age(ARGV[6])
if r.w == '1' then publish() end
return 1
`)

// resolveScript: KEYS rec, age. ARGV pubcmd, channel, now, decision
// ("complete" or "free"), outcome, exp, ttl_ms, member, token (the fence;
// "0" for none), resolution (JSON), record_if_gone ("1" or "0"), holder
// and token of a record made for record_if_gone, stale ("1" or "0": also
// settle the record pending under the fence whose lease ran out at now),
// then the check, ret, exp and ttl_ms of a record made for record_if_gone
// (check and ret "" for none; exp and ttl_ms by ret, else the TTL); a
// record that stands completes by its own window (ownWindow). Returns 1
// when applied, -1 when there is no live record (and record_if_gone is
// "0"), -2 when the record is not indeterminate (nor, with stale, pending),
// -3 when it stands under another token than the fence, -4 when, with
// stale, it is pending under the fence within its lease.
var resolveScript = redis.NewScript(recordLua + ownWindow + `
local now = ARGV[3]
local r = load_rec(KEYS[1])
if not r or tonumber(r.exp) <= tonumber(now) then
  if ARGV[11] ~= '1' then return -1 end
  redis.call('SET', KEYS[1], pack_rec({state = 'completed', holder = ARGV[12], token = ARGV[13],
    lease = now, exp = ARGV[17], created = now, updated = now, outcome = ARGV[5],
    resolution = ARGV[10], check = ARGV[15], ret = ARGV[16]}), 'PX', ARGV[18])
  redis.call('ZADD', KEYS[2], now, ARGV[8])
  extend_age(ARGV[18])
  if r and r.w == '1' then publish() end
  return 1
end
if r.state == 'pending' and ARGV[14] == '1' then
  if r.token ~= ARGV[9] then return -3 end
  if tonumber(r.lease) > tonumber(now) then return -4 end
elseif r.state ~= 'indeterminate' then
  return -2
end
if ARGV[9] ~= '0' and r.token ~= ARGV[9] then return -3 end
if ARGV[4] == 'free' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[8])
else
  local exp, ttl = own_window(r, now, now, ARGV[6], ARGV[7], '0')
  r.state = 'completed'
  r.outcome = ARGV[5]
  r.exp = exp
  r.updated = now
  r.resolution = ARGV[10]
  redis.call('SET', KEYS[1], pack_rec(r), 'PX', ttl)
  extend_age(ttl)
end
if r.w == '1' then publish() end
return 1
`)

// forgetScript: KEYS age, idx (the tenant index set of the previous
// layout, if any), rec1..recN. ARGV pubcmd, channel, member1..memberN.
// Deletes the records and their index entries; returns how many records
// existed.
var forgetScript = redis.NewScript(`
local n = 0
for i = 3, #KEYS do
  if redis.call('DEL', KEYS[i]) == 1 then
    n = n + 1
    redis.call(ARGV[1], ARGV[2], KEYS[i])
  end
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('SREM', KEYS[2], ARGV[i])
end
return n
`)

// sweepScript: KEYS age, idx (the tenant index set of the previous layout,
// if any), rec1..recN. ARGV now, limit, member1..memberN. Deletes up to
// limit records whose exp <= now, drops index entries whose record is
// gone, and returns how many records it deleted.
var sweepScript = redis.NewScript(recordLua + `
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local n = 0
for i = 3, #KEYS do
  local r = load_rec(KEYS[i])
  if not r then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('SREM', KEYS[2], ARGV[i])
  elseif n < limit and tonumber(r.exp) <= now then
    redis.call('DEL', KEYS[i])
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('SREM', KEYS[2], ARGV[i])
    n = n + 1
  end
end
return n
`)

// waitReadScript: KEYS rec. Registers a Wait on a pending record (w, so
// that the scripts that end the claim publish the change) and returns the
// record, packed; nil when there is none. The caller is subscribed before
// it runs the script, so a change after it is published and one before it
// is in the reply.
var waitReadScript = redis.NewScript(recordLua + `
local r = load_rec(KEYS[1])
if not r then return false end
if r.state == 'pending' and r.w ~= '1' then
  r.w = '1'
  redis.call('SET', KEYS[1], pack_rec(r), 'KEEPTTL')
end
return pack_rec(r)
`)

// migrateScript: KEYS rec, age. ARGV member. Converts a record hash of the
// previous layout to the packed string, keeping its time to live, and adds
// it to the age index (scored by its claim time) when it is missing there,
// keeping the index alive as long as the record. Returns 1 when it
// converted a record, 0 when the key holds none or a packed one already.
var migrateScript = redis.NewScript(recordLua + `
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
local r = load_rec(KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('SET', KEYS[1], pack_rec(r), 'PX', ttl)
else
  redis.call('SET', KEYS[1], pack_rec(r))
end
if set(r.created) then
  redis.call('ZADD', KEYS[2], 'NX', r.created, ARGV[1])
end
if ttl > 0 then extend_age(ttl) end
return 1
`)
