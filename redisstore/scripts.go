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
//   - Every script's arguments are named: its text opens with one local
//     per ARGV position (argvLua), generated from the Go struct a caller
//     fills (args.go), so the Lua never reads ARGV by number, except the
//     per-record members of forgetScript and sweepScript.
//   - The first two arguments of every script that may announce a change
//     are pubcmd, the publish command (PUBLISH, or SPUBLISH on a Cluster
//     that has sharded pub/sub), and channel. A change that can end a Wait
//     publishes the record's key, but only when a Wait has registered on
//     the record (w, set by waitReadScript before it reads): a claim and
//     complete nobody waits on publish nothing. Forget always publishes.
//   - Replies are named: their Go constants (args.go) are written into the
//     scripts' Lua as locals of the same meaning.
//
// The age index (KEYS[2] where a script takes it) is the tenant's sorted
// set of record keys scored by "created": a claim adds the key (with
// Options.IndexOnlyWhatWaits only a claim through claimScript: a takeover
// or a claim of an expired record), so do a renewal and a mark (whatever
// the option: an entry already there is left as it is), a release, a free
// resolution, Forget and Sweep remove it, and List, Sweep, Forget and
// CountBacklog walk it (List, Sweep and CountBacklog walk the record keys
// instead, or as well, once the prefix holds unindexed records: walk.go).

// recordLua is shared Lua: the packed record layout (pack_rec, unpack_rec,
// the same as pack and unpack in record.go), load_rec, which reads either
// layout into a table (nil when there is no record), publish, which
// announces a change to the record (KEYS[1]) with the script's pubcmd and
// channel, index_rec and extend_age.
//
// index_rec lists the record r under member in the age index at its claim
// time, unless an entry at that time or later is there already: ZADD GT
// adds a missing entry and moves forward one left by an earlier record of
// the key (which List would skip, its score not the record's created),
// and never moves an entry back. Renew and MarkIndeterminate call it, so
// that a record that can need an operator is listed even when its claim
// did not list it (Options.IndexOnlyWhatWaits). For a record its claim
// listed it changes nothing.
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
local function publish(pubcmd, channel)
  redis.call(pubcmd, channel, KEYS[1])
end
local function index_rec(r, member)
  if set(r.created) then
    redis.call('ZADD', KEYS[2], 'GT', r.created, member)
  end
end
local function extend_age(ttl)
  local want = tonumber(ttl)
  if redis.call('PTTL', KEYS[2]) < want then
    redis.call('PEXPIRE', KEYS[2], want + 60000)
  end
end
`

// ownWindow is shared Lua: when a record keeps a retention window of its
// own (its ret field), own_window(ret, …) returns the expiry of a write at
// now under it (never before floor), the record's physical TTL and its
// index's, in milliseconds, as extend_age wants them; otherwise exp, ttl
// and idx_ttl as the client computed them with the store's TTL. It needs
// nothing of recordLua.
var ownWindow = `
local function own_window(ret, now, floor, exp, ttl, idx_ttl)
  if ret == nil or ret == '' then return exp, ttl, idx_ttl end
  local n = tonumber(now)
  local e = n + tonumber(ret)
  if tonumber(floor) > e then e = tonumber(floor) end
  local ms = math.ceil((e - n) / 1000) + ` + strconv.FormatInt(physicalMargin.Milliseconds(), 10) + `
  local window = math.ceil(tonumber(ret) / 1000) + ` + strconv.FormatInt(physicalMargin.Milliseconds(), 10) + `
  return string.format('%.0f', e), string.format('%.0f', ms), string.format('%.0f', ms + window)
end
`

// fencePrelude is shared Lua: holds is true when r is a live pending
// record held under token at now; NOT_HOLDER and APPLIED are the fenced
// scripts' replies.
var fencePrelude = `
local NOT_HOLDER, APPLIED = ` + luaInts(fenceNotHolder, fenceApplied) + `
local function holds(r, now, token)
  return r ~= nil and r.state == 'pending' and tonumber(r.exp) > tonumber(now) and r.token == token
end
`

// claimScript is the claim's uncommon path, which Store.Claim runs when
// its SET NX found a record it cannot answer from: an expired one still
// in Redis, a takeover's, its own (the claim sent again after a lost
// answer) or a record of the previous layout.
//
// KEYS rec, age. ARGV claimArgs. Returns {claimAcquired}, or {claimHeld,
// packed} with the live record that stopped the claim.
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
var claimScript = redis.NewScript(recordLua + argvLua(claimArgs{}.params()) + `
local ACQUIRED, HELD = '` + claimAcquired + `', '` + claimHeld + `'
local cur = load_rec(KEYS[1])
local sup = ''
if cur then
  if tonumber(cur.exp) > tonumber(now) then
    if cur.state == 'pending' and cur.token == token then
      return {ACQUIRED}
    end
    if cur.state ~= 'pending' or supersede == '0' or cur.token ~= supersede then
      if set(cur.created) then
        -- The MULTI before this script may have listed the key at now.
        redis.call('ZADD', KEYS[2], 'XX', cur.created, member)
      end
      return {HELD, pack_rec(cur)}
    end
    sup = supersede
  end
end
redis.call('SET', KEYS[1], pack_rec({state = 'pending', token = token, lease = lease_until, exp = exp,
  updated = now, created = now, ret = ret, sup = sup, holder = holder, check = check,
  origin = origin}), 'PX', ttl_ms)
redis.call('ZADD', KEYS[2], now, member)
extend_age(age_ttl_ms)
if cur and cur.w == '1' then publish(pubcmd, channel) end
return {ACQUIRED}
`)

// renewScript: KEYS rec, age. ARGV renewArgs. Returns APPLIED, or
// NOT_HOLDER when the token does not hold the claim. A holder that renews
// runs long, and may die with its claim pending: the renewal lists the
// record (index_rec) and keeps the index alive past it.
var renewScript = redis.NewScript(recordLua + fencePrelude + ownWindow + argvLua(renewArgs{}.params()) + `
local r = load_rec(KEYS[1])
if not holds(r, now, token) then return NOT_HOLDER end
local exp, ttl, idx_ttl = own_window(r.ret, now, lease_until, store_exp, store_ttl_ms, store_age_ttl_ms)
r.lease = lease_until
r.exp = exp
r.updated = now
redis.call('SET', KEYS[1], pack_rec(r), 'PX', ttl)
index_rec(r, member)
extend_age(idx_ttl)
return APPLIED
`)

// completeWhole is the completion of a record read whole, in either
// layout: load_rec, holds, and the record repacked with pack_rec. It needs
// recordLua, fencePrelude and ownWindow before it. completeScript runs it
// for what it does not edit in place.
const completeWhole = `
local r = load_rec(KEYS[1])
if not holds(r, now, token) then return NOT_HOLDER end
local exp, ttl = own_window(r.ret, now, now, store_exp, store_ttl_ms, '0')
r.state = 'completed'
r.outcome = outcome
r.exp = exp
r.updated = now
redis.call('SET', KEYS[1], pack_rec(r), 'PX', ttl)
if r.w == '1' then publish(pubcmd, channel) end
return APPLIED
`

// completeScript: KEYS rec, age. ARGV completeArgs. Returns APPLIED, or
// NOT_HOLDER when the token does not hold the claim. It leaves the age
// index alone: the claim or renewal that made the record it completes kept
// it alive a retention window (the record's) past the record (see
// indexTTL).
//
// A record in the packed layout it edits in place: it parses only the
// fixed fields and the lengths of the variable fields before the outcome,
// and writes the record back as one concatenation of the parts it keeps
// and the fields a completion changes (state, exp, updated, outcome), so
// the string it writes is, byte for byte, the one completeWhole would
// write (TestCompleteEditWritesWhatCompleteWrites). On that path it makes
// no function but own_window and builds no table: in Redis's Lua those are
// made again on every call, and measured more than half of the whole
// completion's time on the server (docs/BENCHMARKS.md, section 8). Anything
// else (no record, a record hash of the previous layout) goes to
// completeWhole, whose functions are made only on that path.
var completeScript = redis.NewScript(argvLua(completeArgs{}.params()) + ownWindow + `
local s = redis.pcall('GET', KEYS[1])
local v, state, tok, lease, exp, updated, created, ret, sup, w, head
if type(s) == 'string' then
  v, state, tok, lease, exp, updated, created, ret, sup, w, head =
    string.match(s, '^(%d)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|()')
end
if v ~= '` + packVersion + `' then
` + recordLua + fencePrelude + completeWhole + `
end
local NOT_HOLDER, APPLIED = ` + luaInts(fenceNotHolder, fenceApplied) + `
if state ~= 'pending' or tonumber(exp) <= tonumber(now) or tok ~= token then return NOT_HOLDER end
local p = head
for _ = 1, 3 do
  local n, q = string.match(s, '^(%d+):()', p)
  p = q + tonumber(n)
end
local n, q = string.match(s, '^(%d+):()', p)
local e, ttl = own_window(ret, now, now, store_exp, store_ttl_ms, '0')
redis.call('SET', KEYS[1], v .. '|completed|' .. tok .. '|' .. lease .. '|' .. e .. '|' .. now .. '|' ..
  created .. '|' .. ret .. '|' .. sup .. '|' .. w .. '|' .. string.sub(s, head, p - 1) ..
  #outcome .. ':' .. outcome .. string.sub(s, q + tonumber(n)), 'PX', ttl)
if w == '1' then redis.call(pubcmd, channel, KEYS[1]) end
return APPLIED
`)

// releaseScript: KEYS rec, age. ARGV releaseArgs. Returns APPLIED, or
// NOT_HOLDER when the token does not hold the claim.
var releaseScript = redis.NewScript(recordLua + fencePrelude + argvLua(releaseArgs{}.params()) + `
local r = load_rec(KEYS[1])
if not holds(r, now, token) then return NOT_HOLDER end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], member)
if r.w == '1' then publish(pubcmd, channel) end
return APPLIED
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
// KEYS rec, age. ARGV releaseArgs. Returns APPLIED when it deleted the
// claim, LEASE_ENDED when it ended a takeover's lease, NOT_HOLDER when the
// token holds no pending claim (the claim never ran, or was settled since).
var undoClaimScript = redis.NewScript(recordLua + fencePrelude + argvLua(releaseArgs{}.params()) + `
local LEASE_ENDED = ` + luaInts(undoLeaseEnded) + `
local r = load_rec(KEYS[1])
if not holds(r, now, token) then return NOT_HOLDER end
local result = APPLIED
if set(r.sup) then
  r.lease = now
  r.updated = now
  redis.call('SET', KEYS[1], pack_rec(r), 'KEEPTTL')
  result = LEASE_ENDED
else
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], member)
end
if r.w == '1' then publish(pubcmd, channel) end
return result
`)

// markScript: KEYS rec, age. ARGV markArgs. Returns APPLIED, or
// NOT_HOLDER when the token does not hold the claim. An indeterminate
// record waits for a person: the mark lists it (index_rec).
var markScript = redis.NewScript(recordLua + fencePrelude + argvLua(markArgs{}.params()) + `
local r = load_rec(KEYS[1])
if not holds(r, now, token) then return NOT_HOLDER end
r.state = 'indeterminate'
r.reason = reason
r.exp = exp
r.updated = now
redis.call('SET', KEYS[1], pack_rec(r), 'PX', ttl_ms)
index_rec(r, member)
extend_age(ttl_ms)
if r.w == '1' then publish(pubcmd, channel) end
return APPLIED
`)

// resolveScript: KEYS rec, age. ARGV resolveArgs. A live record that is
// indeterminate (or, with stale, pending under the fence token with its
// lease run out at now) and, when the fence token is not "0", stands under
// it, is completed with the outcome (by its own window: ownWindow) or
// freed, as decision says; a key with no live record gets, with
// record_if_gone, a completed record of its own (gone_*). Returns APPLIED,
// or NOT_FOUND, NOT_INDETERMINATE, OTHER_TOKEN or LEASE_LIVE (the
// resolve* constants say when).
var resolveScript = redis.NewScript(recordLua + ownWindow + argvLua(resolveArgs{}.params()) + `
local APPLIED, NOT_FOUND, NOT_INDETERMINATE, OTHER_TOKEN, LEASE_LIVE = ` +
	luaInts(resolveApplied, resolveNotFound, resolveNotIndeterminate, resolveOtherToken, resolveLeaseLive) + `
local r = load_rec(KEYS[1])
if not r or tonumber(r.exp) <= tonumber(now) then
  if record_if_gone ~= '1' then return NOT_FOUND end
  redis.call('SET', KEYS[1], pack_rec({state = 'completed', holder = gone_holder, token = gone_token,
    lease = now, exp = gone_exp, created = now, updated = now, outcome = outcome,
    resolution = resolution, check = gone_check, ret = gone_ret}), 'PX', gone_ttl_ms)
  redis.call('ZADD', KEYS[2], now, member)
  extend_age(gone_ttl_ms)
  if r and r.w == '1' then publish(pubcmd, channel) end
  return APPLIED
end
if r.state == 'pending' and stale == '1' then
  if r.token ~= token then return OTHER_TOKEN end
  if tonumber(r.lease) > tonumber(now) then return LEASE_LIVE end
elseif r.state ~= 'indeterminate' then
  return NOT_INDETERMINATE
end
if token ~= '0' and r.token ~= token then return OTHER_TOKEN end
if decision == 'free' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], member)
else
  local exp, ttl = own_window(r.ret, now, now, store_exp, store_ttl_ms, '0')
  r.state = 'completed'
  r.outcome = outcome
  r.exp = exp
  r.updated = now
  r.resolution = resolution
  redis.call('SET', KEYS[1], pack_rec(r), 'PX', ttl)
  extend_age(ttl)
end
if r.w == '1' then publish(pubcmd, channel) end
return APPLIED
`)

// forgetScript: KEYS age, idx (the tenant index set of the previous
// layout, if any), rec1..recN. ARGV membersArgs: pubcmd, channel
// (announce), then member1..memberN, ARGV[i] the member of KEYS[i].
// Deletes the records and their index entries; returns how many records
// existed.
var forgetScript = redis.NewScript(argvLua(announce{}.params()) + `
local n = 0
for i = 3, #KEYS do
  if redis.call('DEL', KEYS[i]) == 1 then
    n = n + 1
    redis.call(pubcmd, channel, KEYS[i])
  end
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('SREM', KEYS[2], ARGV[i])
end
return n
`)

// sweepScript: KEYS age, idx (the tenant index set of the previous layout,
// if any), rec1..recN. ARGV membersArgs: now, limit (sweepHead), then
// member1..memberN, ARGV[i] the member of KEYS[i]. Deletes up to limit
// records whose exp <= now, drops index entries whose record is gone, and
// returns how many records it deleted.
var sweepScript = redis.NewScript(recordLua + argvLua(sweepHead{}.params()) + `
now = tonumber(now)
limit = tonumber(limit)
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

// migrateScript: KEYS rec, age. ARGV migrateArgs. Converts a record hash of the
// previous layout to the packed string, keeping its time to live, and adds
// it to the age index (scored by its claim time) when it is missing there,
// keeping the index alive as long as the record. Returns 1 when it
// converted a record, 0 when the key holds none or a packed one already.
var migrateScript = redis.NewScript(recordLua + argvLua(migrateArgs{}.params()) + `
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
local r = load_rec(KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('SET', KEYS[1], pack_rec(r), 'PX', ttl)
else
  redis.call('SET', KEYS[1], pack_rec(r))
end
if set(r.created) then
  redis.call('ZADD', KEYS[2], 'NX', r.created, member)
end
if ttl > 0 then extend_age(ttl) end
return 1
`)
