-- Atomically create jobs with all their indexes, within the CE-wide job limit and the per-owner quota.
-- WIPED records (kept only for their final state) count against neither.
-- KEYS[1] every job (Keys.all), KEYS[2] WIPED jobs (Keys.rest WIPED), KEYS[3] the JEM's due set
-- (Keys.advanceDue), KEYS[4] its bell channel (Keys.advanceBell), then six keys per record i
-- (base = 4 + 6*(i-1)): +1 the record hash (Keys.job), +2 the owner's jobs (Keys.owner),
-- +3 the owner's WIPED jobs, +4 the owner's jobs in the record's REST state (Keys.ownerRest),
-- +5 the record's internal-state set (Keys.internal), +6 its REST-state set (Keys.rest).
-- ARGV[1] maxTotal, ARGV[2] minRequired, ARGV[3] now(ms), ARGV[4] maxPerOwner (0 = none),
-- ARGV[5..] JSON job records, in the order of their keys.
-- Returns {created, limitedBy}: the first min(n, room) records are created, or none when fewer than
-- minRequired fit; limitedBy is 'total', 'owner' or '' (everything fitted). Created jobs are due
-- for the JEM in the same step: a committed job is never missing from the JEM's work list.
local maxTotal = tonumber(ARGV[1])
local minRequired = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local maxPerOwner = tonumber(ARGV[4])
local first = 5
local n = #ARGV - first + 1
if #KEYS ~= 4 + 6 * n then return redis.error_reply('create: ' .. #KEYS .. ' keys for ' .. n .. ' records') end
local recs = {}
for i = 1, n do recs[i] = cjson.decode(ARGV[first + i - 1]) end
local function key(i, k) return KEYS[4 + 6 * (i - 1) + k] end

local used = redis.call('ZCARD', KEYS[1]) - redis.call('SCARD', KEYS[2])
local held = {}
local count, limitedBy = 0, ''
for i = 1, n do
  local ok = recs[i].ownerKey
  if held[ok] == nil then held[ok] = redis.call('ZCARD', key(i, 2)) - redis.call('SCARD', key(i, 3)) end
  if used + 1 > maxTotal then limitedBy = 'total'; break end
  if maxPerOwner > 0 and held[ok] + 1 > maxPerOwner then limitedBy = 'owner'; break end
  used = used + 1
  held[ok] = held[ok] + 1
  count = i
end
if count < minRequired then return {0, limitedBy} end

for i = 1, count do
  local rec = recs[i]
  local flat = {}
  for k, v in pairs(rec) do flat[#flat + 1] = k; flat[#flat + 1] = tostring(v) end
  redis.call('HSET', key(i, 1), unpack(flat))
  redis.call('ZADD', KEYS[1], now, rec.id)
  redis.call('ZADD', key(i, 2), now, rec.id)
  redis.call('SADD', key(i, 4), rec.id)
  redis.call('SADD', key(i, 5), rec.id)
  redis.call('SADD', key(i, 6), rec.id)
  redis.call('ZADD', KEYS[3], 'LT', now, rec.id)
end
if count > 0 then redis.call('PUBLISH', KEYS[4], '1') end
return {count, limitedBy}
