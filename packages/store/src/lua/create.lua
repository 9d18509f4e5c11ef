-- Atomically create jobs with all their indexes, within the CE-wide job limit.
-- KEYS: none besides those built from the prefix (all share one hash tag / slot).
-- ARGV[1] prefix, ARGV[2] maxTotal, ARGV[3] minRequired, ARGV[4] now(ms), ARGV[5..] JSON job records.
-- Returns the number of jobs created: the first min(n, headroom) records, or 0 when headroom < minRequired.
local prefix = ARGV[1]
local maxTotal = tonumber(ARGV[2])
local minRequired = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local n = #ARGV - 4
local headroom = maxTotal - redis.call('ZCARD', prefix .. ':all')
if headroom < minRequired then return 0 end
local count = math.min(n, headroom)
for i = 1, count do
  local rec = cjson.decode(ARGV[4 + i])
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
return count
