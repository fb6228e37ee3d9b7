-- renew.lua: the leases of this host's held grants (shared.c's renew).
-- KEYS: held heldw.  ARGV: lease keep hostprefix runprefix adopt n, then
-- per grant: id age m r c.  Renews this run's held grants (put back if
-- their lease ended meanwhile: counted twice, never less); with adopt,
-- an earlier run's grants of this host get a lease from now.
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local lease = tonumber(ARGV[1])
if ARGV[5] == '1' then
  local hp, rp = ARGV[3], ARGV[4]
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    if id:sub(1, #hp) == hp and id:sub(1, #rp) ~= rp then
      redis.call('ZADD', KEYS[1], 'XX', 'GT', now + lease, id)
    end
  end
end
local i = 7
for k = 1, tonumber(ARGV[6]) do
  redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], (now - tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i + 2] ..
    ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4])
  i = i + 5
end
for k = 1, 2 do redis.call('PEXPIRE', KEYS[k], ARGV[2]) end
return now
