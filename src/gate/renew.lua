-- renew.lua: the leases of this host's held grants (shared.c's renew).
-- KEYS: held heldw.  ARGV: lease keep n, then per grant: id age m r c.
-- Renews this run's held grants (put back if their lease ended
-- meanwhile: counted twice, never less).
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local lease = tonumber(ARGV[1])
local i = 4
for k = 1, tonumber(ARGV[3]) do
  redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], (now - tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i + 2] ..
    ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4])
  i = i + 5
end
for k = 1, 2 do keepfor(KEYS[k], ARGV[2]) end
return now
