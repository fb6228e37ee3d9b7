-- count.lua: each window as Redis counts it now, every host's sends and
-- grants (shared.c's shared_counts, for status).
-- KEYS: log held heldw.  ARGV: nwin, then per window: per unit(1..3)
-- calendar phase.  Returns per window {logged, held} as the grant script
-- counts them now (a held grant whose lease ended: logged at its end).
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local pat = '^(%-?%d+) (%d+) (%d+) (%d+)$'
local held = {0, 0, 0}
local ent = {}
local hs = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #hs, 2 do
  local v = redis.call('HGET', KEYS[3], hs[i])
  if v then
    local g, a, b, c = string.match(v, pat)
    local w = {tonumber(a), tonumber(b), tonumber(c)}
    if tonumber(hs[i + 1]) > now then
      for k = 1, 3 do held[k] = held[k] + w[k] end
    else
      ent[#ent + 1] = {tonumber(hs[i + 1]), w[1], w[2], w[3]}
    end
  end
end
local lg = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #lg, 2 do
  local id, f, a, b, c = string.match(lg[i], '^(%S+) (%-?%d+) (%d+) (%d+) (%d+)$')
  if a then ent[#ent + 1] = {tonumber(lg[i + 1]), tonumber(a), tonumber(b), tonumber(c)} end
end
local out = {}
for i = 0, tonumber(ARGV[1]) - 1 do
  local per = tonumber(ARGV[2 + 4 * i])
  local u = tonumber(ARGV[3 + 4 * i])
  local start = now - per + 1
  if tonumber(ARGV[4 + 4 * i]) == 1 then
    start = now - ((now - tonumber(ARGV[5 + 4 * i])) % per)
  end
  local sum = 0
  for _, e in ipairs(ent) do
    if e[1] >= start then sum = sum + e[u + 1] end
  end
  out[#out + 1] = sum
  out[#out + 1] = held[u]
end
return out
