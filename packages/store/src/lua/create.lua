-- Atomically create jobs with all their indexes, within the CE-wide job limit and the per-owner quota.
-- WIPED records (kept only for their final state) count against neither.
-- KEYS[1] every job (Keys.all), KEYS[2] WIPED jobs (Keys.rest WIPED), KEYS[3] the JEM's due set
-- (Keys.advanceDue), KEYS[4] its bell channel (Keys.advanceBell), KEYS[5] the creating marks
-- (Keys.creating), KEYS[6] the submission holds (Keys.holds), KEYS[7..6+A] the admitted owner's
-- active-state sets (Keys.ownerRest of @ce/model ACTIVE_REST_STATES; A = ARGV[6], may be 0),
-- KEYS[7+A] the share counters (Keys.shareCounts), KEYS[8+A] the pool leases (Keys.mapLeases).
-- ARGV[1] maxTotal, ARGV[2] minRequired, ARGV[3] now(ms), ARGV[4] maxPerOwner (0 = none),
-- ARGV[5] maxActivePerOwner (0 = none), ARGV[6] A, ARGV[7] due time of admitted records (their
-- upload deadline), ARGV[8] key prefix, ARGV[9] the records: one JSON array, the first record whole
-- (field -> string), each later one as its differences from the first (a field whose value is JSON
-- null is absent from that record). A batch of one submission differs mostly in id and job name.
-- ARGV[10] the hold deadline (ms; 0 = no record is held). ARGV[11] the pool account the records
-- run as ('' = none), ARGV[12] the identity that must still hold its lease: the lease may have been
-- released (the identity's last job wiped) between the mapping and this commit, and the account
-- given to another identity; then nothing is created and limitedBy is 'lease'.
-- A record with a `hold` field (its request's key, holds.ts) is held: its request goes into
-- KEYS[6] with the deadline ARGV[10] (the first call of a request sets it), and the record is due
-- for the JEM only at that deadline, whatever its state: the JEM then withdraws it unless the
-- gateway released the hold (lua/hold-release.lua makes it due at once).
-- Per record, the keys are built here with ceKeys(prefix) (generated from keys.ts and prepended by
-- scripts.ts; they share KEYS' `{ce}` hash slot): the record hash (K.job), the owner's jobs
-- (K.owner), its WIPED and REST-state sets (K.ownerRest), its status index (K.ownerStates), the
-- internal- and REST-state sets (K.internal, K.rest).
-- With ARGV[7] > 0, records in PREPARING (not pending) are admitted at creation (@ce/model
-- CREATION_STATES); they are all of the owner whose active sets KEYS[7..6+A] are, and become due
-- at ARGV[7]; every other record is due at once. ARGV[7] = 0: nothing is admitted here.
-- Returns {created, limitedBy}: the first min(n, room) records are created, or none when fewer than
-- minRequired fit; limitedBy is 'total', 'owner' or '' (everything fitted). When the admitted records
-- among them would take the owner past ARGV[5], nothing is created and limitedBy is 'active' (the
-- caller creates them in ACCEPTED instead, for the JEM to admit). Created jobs are on the JEM's work
-- list in the same step (a committed job is never missing from it), and their creating marks are
-- removed (a record exists now).
local maxTotal = tonumber(ARGV[1])
local minRequired = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local maxPerOwner = tonumber(ARGV[4])
local maxActive, nActive, admittedDue = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local K = ceKeys(ARGV[8])
local holdUntil = tonumber(ARGV[10])
if #KEYS ~= 8 + nActive or #ARGV ~= 12 then return redis.error_reply('create: ' .. #KEYS .. ' keys, ' .. #ARGV .. ' args') end
local list = cjson.decode(ARGV[9])
local n = #list
local recs = {}
for i = 1, n do
  if i == 1 then
    recs[1] = list[1]
  else
    local rec = {}
    for k, v in pairs(list[1]) do rec[k] = v end
    for k, v in pairs(list[i]) do
      if v == cjson.null then rec[k] = nil else rec[k] = v end
    end
    recs[i] = rec
  end
  if type(recs[i].id) ~= 'string' or type(recs[i].ownerKey) ~= 'string' then return redis.error_reply('create: record ' .. i .. ' without id or ownerKey') end
  -- Checked before any write: an error reply does not undo what a script already wrote.
  if recs[i].hold ~= nil and recs[i].hold ~= '' and not (holdUntil > 0) then return redis.error_reply('create: record ' .. i .. ' held without a deadline') end
end

if ARGV[11] ~= '' and redis.call('HGET', KEYS[8 + nActive], ARGV[11]) ~= ARGV[12] then return {0, 'lease'} end

local used = redis.call('ZCARD', KEYS[1]) - redis.call('SCARD', KEYS[2])
local held = {}
local count, limitedBy = 0, ''
for i = 1, n do
  local ok = recs[i].ownerKey
  if held[ok] == nil then held[ok] = redis.call('ZCARD', K.owner(ok)) - redis.call('SCARD', K.ownerRest(ok, 'WIPED')) end
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
  for a = 1, nActive do active = active + redis.call('SCARD', KEYS[6 + a]) end
  if active + admitted > maxActive then return {0, 'active'} end
end

local dueNow = false
for i = 1, count do
  local rec = recs[i]
  local id = rec.id
  local flat = {}
  for k, v in pairs(rec) do flat[#flat + 1] = k; flat[#flat + 1] = tostring(v) end
  redis.call('HSET', K.job(id), unpack(flat))
  redis.call('ZADD', KEYS[1], now, id)
  redis.call('ZADD', K.owner(rec.ownerKey), now, id)
  redis.call('SADD', K.ownerRest(rec.ownerKey, rec.rest), id)
  redis.call('HSET', K.ownerStates(rec.ownerKey), id, rec.rest)
  redis.call('SADD', K.internal(rec.state), id)
  redis.call('SADD', K.rest(rec.rest), id)
  if rec.share then redis.call('HINCRBY', KEYS[7 + nActive], rec.share .. '|' .. rec.rest, 1) end
  redis.call('ZREM', KEYS[5], id)
  if rec.hold ~= nil and rec.hold ~= '' then
    redis.call('ZADD', KEYS[6], 'NX', holdUntil, rec.hold)
    redis.call('ZADD', KEYS[3], 'LT', holdUntil, id)
  elseif isAdmitted(rec) then
    redis.call('ZADD', KEYS[3], 'LT', admittedDue, id)
  else
    redis.call('ZADD', KEYS[3], 'LT', now, id)
    dueNow = true
  end
end
if dueNow then redis.call('PUBLISH', KEYS[4], '1') end
return {count, limitedBy}
