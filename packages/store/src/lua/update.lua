-- Compare-and-set update of one job record, moving its index memberships when state/rest change,
-- and raising its revision (`rev`, lib/rev.lua) when anything changed.
-- KEYS[1] the record hash (Keys.job), KEYS[2] the owner's session-bytes hash (Keys.ownerSessionBytes),
-- KEYS[3] the job's upload bookkeeping (Keys.uploads), KEYS[4] the share counters (Keys.shareCounts):
-- the record's `share` counter moves with its REST state (a record without `share` is not counted),
-- KEYS[5] the usage stream (Keys.usageStream).
-- ARGV[1] key prefix, ARGV[2] id, ARGV[3] JSON {field: expected value} (may be {}),
-- ARGV[4] JSON {field: new value} (null or '' removes the field),
-- ARGV[5] JSON {name: value} of usage facts the record does not hold (may be {}).
-- A move into FINISHED appends the whole record, plus `recordId` (id/restarts left: a rerun is a
-- new record) and the ARGV[5] facts as `u.<name>`, to the usage stream: in this script, so the
-- usage record exists exactly when the terminal move happened, whatever crashes next.
-- The state-index keys (K.internal, K.rest, K.ownerRest, K.ownerStates of ceKeys(prefix), generated from keys.ts and
-- prepended by scripts.ts) are built here because the OLD state is only known once read inside the
-- script (the caller's copy may be stale). They still share KEYS' hash slot: the prefix is the `{ce}` hash tag.
-- Returns 1 updated, 0 expectation failed, -1 no such job.
local K, id = ceKeys(ARGV[1]), ARGV[2]
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then return -1 end
local expect = cjson.decode(ARGV[3])
for k, v in pairs(expect) do
  local cur = redis.call('HGET', key, k) or ''
  if cur ~= tostring(v) then return 0 end
end
local set = cjson.decode(ARGV[4])
-- The revision only ever goes up, here: a caller's copy of it may be stale.
set.rev = nil
-- The share is fixed at creation: changing it here would leave its counter behind.
set.share = nil
local cur = redis.call('HMGET', key, 'state', 'rest', 'ownerKey', 'share')
local oldState, oldRest, ok, share = cur[1], cur[2], cur[3], cur[4]
local flat, del = {}, {}
for k, v in pairs(set) do
  if v == cjson.null or v == '' then del[#del + 1] = k else flat[#flat + 1] = k; flat[#flat + 1] = tostring(v) end
end
if #flat > 0 then redis.call('HSET', key, unpack(flat)) end
if #del > 0 then redis.call('HDEL', key, unpack(del)) end
if #flat > 0 or #del > 0 then bumpRev(key) end
local newState, newRest = set.state, set.rest
if newState and newState ~= oldState then
  redis.call('SREM', K.internal(oldState), id)
  redis.call('SADD', K.internal(newState), id)
  if newState == 'DELETED' then
    -- WIPED: the session directory is gone, so are its bytes in the owner's quota.
    local bytes = tonumber(redis.call('HGET', KEYS[2], id) or '0')
    if bytes ~= 0 then redis.call('HINCRBY', KEYS[2], '*', -bytes) end
    redis.call('HDEL', KEYS[2], id)
    redis.call('DEL', KEYS[3])
  end
end
if newState == 'FINISHED' and oldState ~= 'FINISHED' then
  local entry = redis.call('HGETALL', key)
  entry[#entry + 1] = 'recordId'
  entry[#entry + 1] = id .. '/' .. (redis.call('HGET', key, 'rerun') or '0')
  for k, v in pairs(cjson.decode(ARGV[5] or '{}')) do
    if v ~= cjson.null then entry[#entry + 1] = 'u.' .. k; entry[#entry + 1] = tostring(v) end
  end
  redis.call('XADD', KEYS[5], '*', unpack(entry))
end
if newRest and newRest ~= oldRest then
  redis.call('SREM', K.rest(oldRest), id)
  redis.call('SADD', K.rest(newRest), id)
  redis.call('SREM', K.ownerRest(ok, oldRest), id)
  redis.call('SADD', K.ownerRest(ok, newRest), id)
  redis.call('HSET', K.ownerStates(ok), id, newRest)
  if share then
    if redis.call('HINCRBY', KEYS[4], share .. '|' .. oldRest, -1) <= 0 then redis.call('HDEL', KEYS[4], share .. '|' .. oldRest) end
    redis.call('HINCRBY', KEYS[4], share .. '|' .. newRest, 1)
  end
end
return 1
