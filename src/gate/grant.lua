-- grant.lua (after common.lua): may this grant go now, for every host
-- (shared.c's shared_admit).  Run atomically by Redis at Redis's own clock.
-- KEYS[6..9]: log held heldw susp.  ARGV[6..]: id m r c lease maxconn poll
-- holdms recheck nwin, then per window: limit per unit(1..3) calendar
-- phase.  Returns {code, ms, now}: 1 granted; 0 wait ms; 2 write this
-- host's history back first; 3 suspended for ms (then {3, ms, now, v},
-- v the suspension's value: "HOST KIND REPLY", shared.h); 4 a rebuild
-- holds every grant for ms.  A window that an unknown outcome helps fill
-- is asked again after recheck ms at most: its host may settle it
-- (SETTLE).
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local keep = tonumber(ARGV[3])
local pat = '^(%-?%d+) (%d+) (%d+) (%d+)$'
local poll = tonumber(ARGV[12])
if not whole(now) then return {2, 0, now} end
local h = rebuilt(now, tonumber(ARGV[13]), poll)
if h > 0 then return {4, h, now} end
local s = redis.call('PTTL', KEYS[9])
if s > 0 then return {3, s, now, redis.call('GET', KEYS[9])} end
local w = {tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])}
local old = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now, 'WITHSCORES')
for i = 1, #old, 2 do
  local v = redis.call('HGET', KEYS[8], old[i])
  if v then
    local g, a, b, c = string.match(v, pat)
    redis.call('ZADD', KEYS[6], old[i + 1], old[i] .. ' ' .. g .. ' ' .. a .. ' ' .. b .. ' ' .. c)
    redis.call('HDEL', KEYS[8], old[i])
  end
  redis.call('ZREM', KEYS[7], old[i])
end
local held = {0, 0, 0}
local ids = redis.call('ZRANGE', KEYS[7], 0, -1)
for _, id in ipairs(ids) do
  local v = redis.call('HGET', KEYS[8], id)
  if v then
    local g, a, b, c = string.match(v, pat)
    held[1] = held[1] + tonumber(a)
    held[2] = held[2] + tonumber(b)
    held[3] = held[3] + tonumber(c)
  end
end
local maxc = tonumber(ARGV[11])
if maxc > 0 and w[3] > 0 and held[3] + w[3] > maxc then return {0, poll, now} end
local nwin = tonumber(ARGV[15])
local maxper = 0
for i = 0, nwin - 1 do
  local p = tonumber(ARGV[17 + 5 * i])
  if p > maxper then maxper = p end
end
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now - maxper)
local lg = redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. (now - maxper), '+inf', 'WITHSCORES')
local ent = {}
for i = 1, #lg, 2 do
  local id, f, a, b, c = string.match(lg[i], '^(%S+) (%-?%d+) (%d+) (%d+) (%d+)$')
  local t = tonumber(lg[i + 1])
  ent[#ent + 1] = {t, tonumber(a), tonumber(b), tonumber(c), tonumber(f) < t}
end
local wait = 0
for i = 0, nwin - 1 do
  local lim = tonumber(ARGV[16 + 5 * i])
  local per = tonumber(ARGV[17 + 5 * i])
  local u = tonumber(ARGV[18 + 5 * i])
  local cal = tonumber(ARGV[19 + 5 * i])
  local ph = tonumber(ARGV[20 + 5 * i])
  if w[u] > 0 then
    local need = held[u] + w[u]
    if need > lim then return {0, poll, now} end
    local start = now - per + 1
    if cal == 1 then start = now - ((now - ph) % per) end
    local sum, open = 0, false
    for _, e in ipairs(ent) do
      if e[1] >= start then
        sum = sum + e[u + 1]
        open = open or (e[5] and e[u + 1] > 0)
      end
    end
    local excess = sum + need - lim
    if excess > 0 then
      local acc = 0
      for _, e in ipairs(ent) do
        if e[1] >= start then
          acc = acc + e[u + 1]
          if acc >= excess then
            local at = e[1] + per
            if cal == 1 then at = e[1] - ((e[1] - ph) % per) + per end
            if open and at - now > tonumber(ARGV[14]) then at = now + tonumber(ARGV[14]) end
            if at - now > wait then wait = at - now end
            break
          end
        end
      end
    end
  end
end
if wait > 0 then return {0, wait, now} end
redis.call('ZADD', KEYS[7], now + tonumber(ARGV[10]), ARGV[6])
redis.call('HSET', KEYS[8], ARGV[6], now .. ' ' .. ARGV[7] .. ' ' .. ARGV[8] .. ' ' .. ARGV[9])
for k = 6, 8 do keepfor(KEYS[k], keep) end
return {1, 0, now}
