-- After a delegation renewal: the new credential end time reaches the records of the jobs whose
-- main delegation it is (GLUE2 ProxyExpirationTime), raising their revision (`rev`, record.ts; lib/rev.lua).
-- With ARGV[3], the records also learn when the renewed credential was stored (`credRenewed`), and
-- with ARGV[4] the jobs that may be running with a copy of it (SUBMIT, INLRMS) are rung on the JEM's
-- work list, which then replaces the job's credential files (apps/jem/src/credential-files.ts).
-- Missing records are not re-created.
-- KEYS[1..n] job record hashes (Keys.job) of the jobs bound to the delegation.
-- ARGV[1] delegation id, ARGV[2] new end time (ms; empty: unknown, the field is removed),
-- ARGV[3] when the credential was stored (ms; optional), ARGV[4] key prefix (ceKeys; optional: ring).
-- Returns the number of records updated.
local n = 0
local ring = {}
for _, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'mainDelegation') == ARGV[1] then
    if ARGV[2] ~= '' then
      redis.call('HSET', key, 'delegationExpires', ARGV[2])
    else
      redis.call('HDEL', key, 'delegationExpires')
    end
    if ARGV[3] and ARGV[3] ~= '' then redis.call('HSET', key, 'credRenewed', ARGV[3]) end
    bumpRev(key)
    n = n + 1
    local state = redis.call('HGET', key, 'state')
    if ARGV[4] and (state == 'SUBMIT' or state == 'INLRMS') then ring[#ring + 1] = redis.call('HGET', key, 'id') end
  end
end
if #ring > 0 then
  local K = ceKeys(ARGV[4])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, id in ipairs(ring) do redis.call('ZADD', K.advanceDue(), 'LT', now, id) end
  redis.call('PUBLISH', K.advanceBell(), '1')
end
return n
