
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

local NOT_HOLDER, APPLIED = 0, 1
local function holds(r, now, token)
  return r ~= nil and r.state == 'pending' and tonumber(r.exp) > tonumber(now) and r.token == token
end

local pubcmd = ARGV[1]
local channel = ARGV[2]
local now = ARGV[3]
local token = ARGV[4]
local member = ARGV[5]

local LEASE_ENDED = 2
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
