-- Atomically create jobs with all their indexes, within the CE-wide job limit and the per-owner quota.
-- WIPED records (kept only for their final state) count against neither.
-- KEYS[1] every job (Keys.all), KEYS[2] WIPED jobs (Keys.rest WIPED), KEYS[3] the JEM's due set
-- (Keys.advanceDue), KEYS[4] its bell channel (Keys.advanceBell), KEYS[5..4+A] the admitted owner's
-- active-state sets (Keys.ownerRest of @ce/model ACTIVE_REST_STATES; A = ARGV[6], may be 0), then six
-- keys per record i (base = 4 + A + 6*(i-1)): +1 the record hash (Keys.job), +2 the owner's jobs
-- (Keys.owner), +3 the owner's WIPED jobs, +4 the owner's jobs in the record's REST state
-- (Keys.ownerRest), +5 the record's internal-state set (Keys.internal), +6 its REST-state set (Keys.rest).
-- ARGV[1] maxTotal, ARGV[2] minRequired, ARGV[3] now(ms), ARGV[4] maxPerOwner (0 = none),
-- ARGV[5] maxActivePerOwner (0 = none), ARGV[6] A, ARGV[7] due time of admitted records (their
-- upload deadline), ARGV[8..] JSON job records, in the order of their keys.
-- With ARGV[7] > 0, records in PREPARING (not pending) are admitted at creation (@ce/model
-- CREATION_STATES); they are all of the owner whose active sets KEYS[5..4+A] are, and become due
-- at ARGV[7]; every other record is due at once. ARGV[7] = 0: nothing is admitted here.
-- Returns {created, limitedBy}: the first min(n, room) records are created, or none when fewer than
-- minRequired fit; limitedBy is 'total', 'owner' or '' (everything fitted). When the admitted records
-- among them would take the owner past ARGV[5], nothing is created and limitedBy is 'active' (the
-- caller creates them in ACCEPTED instead, for the JEM to admit). Created jobs are on the JEM's work
-- list in the same step: a committed job is never missing from it.
local maxTotal = tonumber(ARGV[1])
local minRequired = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local maxPerOwner = tonumber(ARGV[4])
local maxActive, nActive, admittedDue = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local first = 8
local n = #ARGV - first + 1
local base = 4 + nActive
if #KEYS ~= base + 6 * n then return redis.error_reply('create: ' .. #KEYS .. ' keys for ' .. n .. ' records') end
local recs = {}
for i = 1, n do recs[i] = cjson.decode(ARGV[first + i - 1]) end
local function key(i, k) return KEYS[base + 6 * (i - 1) + k] end

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

local function isAdmitted(rec) return admittedDue > 0 and rec.state == 'PREPARING' and rec.pending ~= '1' end
local admitted = 0
for i = 1, count do
  if isAdmitted(recs[i]) then admitted = admitted + 1 end
end
if admitted > 0 and maxActive > 0 then
  local active = 0
  for a = 1, nActive do active = active + redis.call('SCARD', KEYS[4 + a]) end
  if active + admitted > maxActive then return {0, 'active'} end
end

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
  if isAdmitted(rec) then
    redis.call('ZADD', KEYS[3], 'LT', admittedDue, rec.id)
  else
    redis.call('ZADD', KEYS[3], 'LT', now, rec.id)
  end
end
if count > admitted then redis.call('PUBLISH', KEYS[4], '1') end
return {count, limitedBy}
