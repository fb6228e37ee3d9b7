-- report.lua: a grant ended (shared.c's shared_ended).
-- KEYS: log held heldw.  ARGV: id kind(S X N T R) delta grace keep m r c
-- age.  Logs the send the report says, at Redis time rounded up to the
-- millisecond (as the local gate does: a send reported at 1000.3 leaves a
-- window of T no sooner than 1000.3 + T, where grants look at the time
-- rounded down); returns the time rounded down.
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local nowc = tonumber(tm[1]) * 1000 + math.ceil(tonumber(tm[2]) / 1000)
local v = redis.call('HGET', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
local kind = ARGV[2]
if kind == 'R' then return now end
local g = now - tonumber(ARGV[9])
if v then g = tonumber(string.match(v, '^(%-?%d+)')) end
local m, r, c = ARGV[6], ARGV[7], ARGV[8]
local from, at = nowc, nowc
if kind == 'S' then
  at = nowc - tonumber(ARGV[3])
  if at < g then at = g end
  if at > nowc then at = nowc end
  from = at
elseif kind == 'X' then
  from = g
  at = nowc + tonumber(ARGV[4])
elseif kind == 'N' then
  m = '0'
  r = '0'
end
redis.call('ZADD', KEYS[1], at, ARGV[1] .. ' ' .. from .. ' ' .. m .. ' ' .. r .. ' ' .. c)
keepfor(KEYS[1], ARGV[5])
return now
