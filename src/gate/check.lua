-- check.lua (after common.lua): once a second per gate and upstream
-- (shared.c's shared_tick): does the store hold this host's history, and
-- does a rebuild hold the grants?
-- KEYS[6..7]: susp lift.  ARGV[6..7]: holdms poll.  Returns {w, ms, s, v,
-- n, by}: w 1 when this host must write its history back; ms, how long a
-- rebuild still holds every grant (0: none); s, the suspension's ms left
-- (<= 0: none) and v its value ("HOST KIND REPLY", shared.h; '' when
-- none); n, the lifts the store counted, and by, the host of the last
-- ('' none; lifts(), common.lua).
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local w = 0
if not whole(now) then w = 1 end
local rb = rebuilt(now, tonumber(ARGV[6]), tonumber(ARGV[7]))
local s = redis.call('PTTL', KEYS[6])
local v = ''
if s > 0 then v = redis.call('GET', KEYS[6]) end
local n, by = lifts(KEYS[7])
return {w, rb, s, v, n, by}
