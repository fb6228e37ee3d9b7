-- check.lua (after common.lua): once a second per gate and upstream
-- (shared.c's shared_tick): does the store hold this host's history, and
-- does a rebuild hold the grants?
-- ARGV[6..7]: holdms poll.  Returns {w, ms}: w 1 when this host must
-- write its history back; ms, how long a rebuild still holds every
-- grant (0: none).
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local w = 0
if not whole(now) then w = 1 end
return {w, rebuilt(now, tonumber(ARGV[6]), tonumber(ARGV[7]))}
