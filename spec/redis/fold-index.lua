
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
