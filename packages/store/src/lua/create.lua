-- Atomically create jobs with all their indexes, within the CE-wide job limit and the per-owner quota.
-- WIPED records (kept only for their final state) count against neither.
-- KEYS: none besides those built from the prefix (all share one hash tag / slot).
-- ARGV[1] prefix, ARGV[2] maxTotal, ARGV[3] minRequired, ARGV[4] now(ms), ARGV[5] maxPerOwner (0 = none),
-- ARGV[6..] JSON job records.
-- Returns {created, limitedBy}: the first min(n, room) records are created, or none when fewer than
-- minRequired fit; limitedBy is 'total', 'owner' or '' (everything fitted).
local prefix = ARGV[1]
local maxTotal = tonumber(ARGV[2])
local minRequired = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local maxPerOwner = tonumber(ARGV[5])
local first = 6
local n = #ARGV - first + 1
local recs = {}
for i = 1, n do recs[i] = cjson.decode(ARGV[first + i - 1]) end

local used = redis.call('ZCARD', prefix .. ':all') - redis.call('SCARD', prefix .. ':r:WIPED')
local held = {}
local count, limitedBy = 0, ''
for i = 1, n do
  local ok = recs[i].ownerKey
  if held[ok] == nil then
    held[ok] = redis.call('ZCARD', prefix .. ':o:' .. ok) - redis.call('SCARD', prefix .. ':o:' .. ok .. ':s:WIPED')
  end
  if used + 1 > maxTotal then limitedBy = 'total'; break end
  if maxPerOwner > 0 and held[ok] + 1 > maxPerOwner then limitedBy = 'owner'; break end
  used = used + 1
  held[ok] = held[ok] + 1
  count = i
end
if count < minRequired then return {0, limitedBy} end

for i = 1, count do
  local rec = recs[i]
  local id, ok = rec.id, rec.ownerKey
  local flat = {}
  for k, v in pairs(rec) do flat[#flat + 1] = k; flat[#flat + 1] = tostring(v) end
  redis.call('HSET', prefix .. ':job:' .. id, unpack(flat))
  redis.call('ZADD', prefix .. ':all', now, id)
  redis.call('ZADD', prefix .. ':o:' .. ok, now, id)
  redis.call('SADD', prefix .. ':o:' .. ok .. ':s:' .. rec.rest, id)
  redis.call('SADD', prefix .. ':i:' .. rec.state, id)
  redis.call('SADD', prefix .. ':r:' .. rec.rest, id)
end
return {count, limitedBy}
