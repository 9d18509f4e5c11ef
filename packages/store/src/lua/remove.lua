-- Remove a job record and every index entry (clean, or end of the WIPED retention).
-- KEYS[1] the record hash (Keys.job), KEYS[2] every job (Keys.all), KEYS[3] the expiry schedule
-- (Keys.expiry), KEYS[4] the job's upload bookkeeping (Keys.uploads), KEYS[5] the JEM's due set
-- (Keys.advanceDue), KEYS[6] its in-flight set (Keys.advanceInflight), KEYS[7] the share counters
-- (Keys.shareCounts).
-- ARGV[1] key prefix, ARGV[2] id.
-- The owner's and state-index keys and the delegations' job sets are built here with ceKeys(prefix)
-- (generated from keys.ts, prepended by scripts.ts): the owner, state and delegations are only known
-- once the record is read inside the script. They still share KEYS' hash slot: the prefix is the `{ce}` hash tag.
-- Returns 1 removed, 0 no such job.
local K, id = ceKeys(ARGV[1]), ARGV[2]
local cur = redis.call('HMGET', KEYS[1], 'state', 'rest', 'ownerKey', 'delegations', 'share')
if not cur[3] then return 0 end
local ok = cur[3]
if cur[1] then redis.call('SREM', K.internal(cur[1]), id) end
if cur[2] then
  redis.call('SREM', K.rest(cur[2]), id)
  redis.call('SREM', K.ownerRest(ok, cur[2]), id)
  if cur[5] then
    local f = cur[5] .. '|' .. cur[2]
    if redis.call('HINCRBY', KEYS[7], f, -1) <= 0 then redis.call('HDEL', KEYS[7], f) end
  end
end
redis.call('ZREM', K.owner(ok), id)
redis.call('HDEL', K.ownerStates(ok), id)
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
redis.call('ZREM', KEYS[5], id)
redis.call('ZREM', KEYS[6], id)
if cur[4] and cur[4] ~= '' then
  for d in string.gmatch(cur[4], '[^,]+') do redis.call('SREM', K.delegJobs(d), id) end
end
-- Its uploaded session bytes no longer count against the owner's quota; range bookkeeping goes too.
local sb = K.ownerSessionBytes(ok)
local bytes = tonumber(redis.call('HGET', sb, id) or '0')
if bytes ~= 0 then redis.call('HINCRBY', sb, '*', -bytes) end
redis.call('HDEL', sb, id)
redis.call('DEL', KEYS[4])
redis.call('DEL', KEYS[1])
return 1
