-- check.lua: does Redis still hold the history (shared.c's shared_tick)?
-- KEYS: epoch hostmark hold.  ARGV: keep holdms.  1: this host must
-- write its history back (Redis came back empty: no grant to anyone for
-- holdms meanwhile); 0: nothing to do.
if redis.call('EXISTS', KEYS[1]) == 0 then
  local tm = redis.call('TIME')
  redis.call('SET', KEYS[1], tm[1], 'PX', ARGV[1])
  redis.call('SET', KEYS[3], 1, 'PX', ARGV[2])
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 0 then return 1 end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 0
