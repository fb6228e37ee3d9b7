-- restore.lua: Redis came back empty; this host writes its own history
-- back (shared.c's restore).
-- KEYS: log held heldw hostmark.  ARGV: keep lease nlog, then per entry:
-- id agefrom aget m r c; then nheld, per grant: id age m r c.  Writes this
-- host's history back (ages: ms before now, now rounded up as a report's)
-- and marks it done.
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.ceil(tonumber(tm[2]) / 1000)
local n = tonumber(ARGV[3])
local i = 4
for k = 1, n do
  redis.call('ZADD', KEYS[1], now - tonumber(ARGV[i + 2]), ARGV[i] .. ' ' ..
    (now - tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4] .. ' ' .. ARGV[i + 5])
  i = i + 6
end
local nh = tonumber(ARGV[i])
i = i + 1
for k = 1, nh do
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[i])
  redis.call('HSET', KEYS[3], ARGV[i], (now - tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i + 2] ..
    ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4])
  i = i + 5
end
redis.call('SET', KEYS[4], 1, 'PX', ARGV[1])
for k = 1, 3 do redis.call('PEXPIRE', KEYS[k], ARGV[1]) end
return now
