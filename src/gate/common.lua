-- common.lua: the functions every script begins with (shared.c puts this
-- file before each).
--
-- keepfor(): a key lives at least ms more.  Hosts may have different
-- leases (each gate's grace), so a host's call never shortens the life
-- of what another host's needs.
--
-- whole() and rebuilt(), for check.lua, grant.lua and restore.lua: is
-- this store the one the window's history was made whole on?
-- KEYS[1..5]: gen built hosts rebuild waitfor.  ARGV[1..5]: ident host
-- keep rebuildms alive.
--   gen      the identity of the store on which the hosts last wrote
--            their own histories back: its Redis run id and replication
--            id (ident, read by each gate when it connects)
--   built    hash: the hosts that wrote theirs back on it
--   hosts    zset: every host, scored by its last call (Redis ms)
--   rebuild  while a rebuild holds every grant: when it began (PX
--            rebuildms, the longest it holds)
--   waitfor  set: the hosts whose last call came within `alive` ms of
--            the latest one the store had when the rebuild began, until
--            each has written its history back
-- A store that is not the one gen names (restarted, from an older
-- snapshot or none; a replica promoted; emptied) begins a rebuild.
--
-- lifts() and lifted(), for suspend.lua, restore.lua and check.lua: the
-- key lift ("N T HOST") counts the RESUMEs the store got: the Nth, the
-- last, at Redis ms T, by HOST.  A host that met a suspension notes N
-- when it stores the suspension; a larger N later, in the same store
-- (same run id and replication id), means a RESUME somewhere lifted it.
-- A suspension that went with no larger N was lost (a key evicted or
-- deleted, a store emptied), never lifted: its host writes it back.

local function keepfor(k, ms)
  if redis.call('PTTL', k) < tonumber(ms) then redis.call('PEXPIRE', k, ms) end
end

-- Is this host's history in this store?  Begins a rebuild when the store
-- is not the one gen names; notes the host's call.
local function whole(now)
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
    redis.call('DEL', KEYS[2], KEYS[5])
    if #last == 2 then
      local from = tonumber(last[2]) - tonumber(ARGV[5])
      for _, h in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], from, '+inf')) do
        redis.call('SADD', KEYS[5], h)
      end
      redis.call('PEXPIRE', KEYS[5], ARGV[4])
    end
    redis.call('SET', KEYS[1], ARGV[1])
    redis.call('SET', KEYS[4], now, 'PX', ARGV[4])
  end
  redis.call('ZADD', KEYS[3], now, ARGV[2])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[3]))
  for k = 1, 3 do keepfor(KEYS[k], ARGV[3]) end
  return redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1
end

-- While a rebuild runs, how long grants still wait (ms): at least holdms
-- after it began, and until every host of waitfor wrote its history back
-- (poll: ask again then).  0 once it is over (then it is ended here).
local function rebuilt(now, holdms, poll)
  local rb = redis.call('GET', KEYS[4])
  if not rb then return 0 end
  local left = tonumber(rb) + holdms - now
  if left > 0 then return left end
  if redis.call('SCARD', KEYS[5]) > 0 then return poll end
  redis.call('DEL', KEYS[4], KEYS[5])
  return 0
end

-- The lifts counted (0: none), and the host of the last ('' none).
local function lifts(k)
  local l = redis.call('GET', k)
  if not l then return 0, '' end
  local n, h = string.match(l, '^(%d+) %-?%d+ (%S+)$')
  if not n then return 0, '' end
  return tonumber(n), h
end

-- A suspension of ms more with value v: the store keeps, in key susp, the
-- one that ends later (with its value).
local function suspend(susp, ms, v)
  if redis.call('PTTL', susp) < tonumber(ms) then redis.call('SET', susp, v, 'PX', ms) end
end

-- A RESUME at host: the suspension (key susp) goes, and lift counts one
-- more; lift is kept at least keep ms, and as long as the suspension
-- would have run.  Returns the lifts counted.
local function lifted(now, susp, lift, host, keep)
  local n = lifts(lift) + 1
  local k = tonumber(keep)
  local left = redis.call('PTTL', susp)
  local was = redis.call('PTTL', lift)
  if left > k then k = left end
  if was > k then k = was end
  redis.call('DEL', susp)
  redis.call('SET', lift, n .. ' ' .. now .. ' ' .. host, 'PX', k)
  return n
end
