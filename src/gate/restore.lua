-- restore.lua (after common.lua): this host writes its own history back
-- (shared.c's restore), in place of what the store holds of it.
-- KEYS[6..10]: log held heldw susp lift.  ARGV[6..]: lease suspms suspval
-- nlog, then per entry: id agefrom aget m r c; then nheld, per grant: id
-- age m r c.  Ages are ms before now (now rounded up, as a report's).
-- suspms: the suspension this host knows of (made at least that long,
-- with the value suspval: "HOST KIND REPLY", shared.h), 0 none, -1
-- lifted here while the store was away (lifted(), common.lua).  Marks
-- the host's history written back.  Returns {now, n}: n the lifts the
-- store counted (lifts(), common.lua).
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.ceil(tonumber(tm[2]) / 1000)
whole(now)
local pre = ARGV[2] .. '.'
local function mine(s) return s:sub(1, #pre) == pre end
for _, e in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
  if mine(e) then redis.call('ZREM', KEYS[6], e) end
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[7], 0, -1)) do
  if mine(id) then redis.call('ZREM', KEYS[7], id) end
end
for _, id in ipairs(redis.call('HKEYS', KEYS[8])) do
  if mine(id) then redis.call('HDEL', KEYS[8], id) end
end
local n = tonumber(ARGV[9])
local i = 10
for k = 1, n do
  redis.call('ZADD', KEYS[6], now - tonumber(ARGV[i + 2]), ARGV[i] .. ' ' ..
    (now - tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4] .. ' ' .. ARGV[i + 5])
  i = i + 6
end
local nh = tonumber(ARGV[i])
i = i + 1
for k = 1, nh do
  redis.call('ZADD', KEYS[7], now + tonumber(ARGV[6]), ARGV[i])
  redis.call('HSET', KEYS[8], ARGV[i], (now - tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i + 2] ..
    ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4])
  i = i + 5
end
local s = tonumber(ARGV[7])
if s < 0 then
  lifted(now, KEYS[9], KEYS[10], ARGV[2], ARGV[3])
elseif s > 0 then
  suspend(KEYS[9], s, ARGV[8])
end
redis.call('HSET', KEYS[2], ARGV[2], 1)
redis.call('SREM', KEYS[5], ARGV[2])
keepfor(KEYS[2], ARGV[3])
for k = 6, 8 do keepfor(KEYS[k], ARGV[3]) end
return {now, (lifts(KEYS[10]))}
