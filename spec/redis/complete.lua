
local pubcmd = ARGV[1]
local channel = ARGV[2]
local now = ARGV[3]
local token = ARGV[4]
local store_exp = ARGV[5]
local store_ttl_ms = ARGV[6]
local outcome = ARGV[7]

local function own_window(ret, now, floor, exp, ttl, idx_ttl)
  if ret == nil or ret == '' then return exp, ttl, idx_ttl end
  local n = tonumber(now)
  local e = n + tonumber(ret)
  if tonumber(floor) > e then e = tonumber(floor) end
  local ms = math.ceil((e - n) / 1000) + 60000
  local window = math.ceil(tonumber(ret) / 1000) + 60000
  return string.format('%.0f', e), string.format('%.0f', ms), string.format('%.0f', ms + window)
end

local s = redis.pcall('GET', KEYS[1])
local v, state, tok, lease, exp, updated, created, ret, sup, w, head
if type(s) == 'string' then
  v, state, tok, lease, exp, updated, created, ret, sup, w, head =
    string.match(s, '^(%d)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|()')
end
if v ~= '2' then

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

end
local NOT_HOLDER, APPLIED = 0, 1
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
