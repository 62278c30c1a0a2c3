
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
  local out = {'2'}
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

local function own_window(ret, now, floor, exp, ttl, idx_ttl)
  if ret == nil or ret == '' then return exp, ttl, idx_ttl end
  local n = tonumber(now)
  local e = n + tonumber(ret)
  if tonumber(floor) > e then e = tonumber(floor) end
  local ms = math.ceil((e - n) / 1000) + 60000
  local window = math.ceil(tonumber(ret) / 1000) + 60000
  return string.format('%.0f', e), string.format('%.0f', ms), string.format('%.0f', ms + window)
end

local pubcmd = ARGV[1]
local channel = ARGV[2]
local now = ARGV[3]
local decision = ARGV[4]
local outcome = ARGV[5]
local store_exp = ARGV[6]
local store_ttl_ms = ARGV[7]
local member = ARGV[8]
local token = ARGV[9]
local resolution = ARGV[10]
local record_if_gone = ARGV[11]
local gone_holder = ARGV[12]
local gone_token = ARGV[13]
local stale = ARGV[14]
local gone_check = ARGV[15]
local gone_ret = ARGV[16]
local gone_exp = ARGV[17]
local gone_ttl_ms = ARGV[18]

local APPLIED, NOT_FOUND, NOT_INDETERMINATE, OTHER_TOKEN, LEASE_LIVE = 1, -1, -2, -3, -4
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
