-- suspend.lua (after common.lua): a suspension every host honours, or
-- its lifting (shared.c's shared_suspend).  KEYS: susp lift.  ARGV: ms
-- value host keep.
-- ms > 0: a suspension of ms more, with value ("HOST KIND REPLY",
-- shared.h): suspend() (common.lua) keeps the one that ends later, so a
-- shorter one stored after a longer one (another host's throttle after a
-- quota) changes nothing.
-- ms == 0: a RESUME at host: lifted() (common.lua).
-- Returns N, the lifts the store counted after the call (0: none).
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local ms = tonumber(ARGV[1])
if ms <= 0 then return lifted(now, KEYS[1], KEYS[2], ARGV[3], ARGV[4]) end
suspend(KEYS[1], ms, ARGV[2])
return (lifts(KEYS[2]))
