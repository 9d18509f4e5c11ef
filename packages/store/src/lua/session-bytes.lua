-- Reserves (delta > 0) or releases (delta < 0) uploaded session bytes of one job against the
-- per-job and per-owner quotas, atomically for every gateway.
-- KEYS[1] the owner's session-bytes hash (field = job id, '*' = owner total).
-- ARGV[1] job id, ARGV[2] delta, ARGV[3] max per job, ARGV[4] max per owner.
-- Returns {1, jobBytes, ownerBytes} applied, {-1, ...} per-job quota, {-2, ...} per-owner quota.
local id, delta = ARGV[1], tonumber(ARGV[2])
local job = tonumber(redis.call('HGET', KEYS[1], id) or '0')
local owner = tonumber(redis.call('HGET', KEYS[1], '*') or '0')
if delta > 0 then
  if job + delta > tonumber(ARGV[3]) then return {-1, job, owner} end
  if owner + delta > tonumber(ARGV[4]) then return {-2, job, owner} end
end
-- Never below zero (a release after the record was cleaned up).
if job + delta < 0 then delta = -job end
if delta ~= 0 then
  job = redis.call('HINCRBY', KEYS[1], id, delta)
  owner = redis.call('HINCRBY', KEYS[1], '*', delta)
  if owner < 0 then redis.call('HSET', KEYS[1], '*', 0); owner = 0 end
  if job == 0 then redis.call('HDEL', KEYS[1], id) end
end
return {1, job, owner}
