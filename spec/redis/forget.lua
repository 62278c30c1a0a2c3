
local pubcmd = ARGV[1]
local channel = ARGV[2]

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
