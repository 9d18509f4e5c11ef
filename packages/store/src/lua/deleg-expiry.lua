-- After a delegation renewal: the new credential end time reaches the records of the jobs whose
-- main delegation it is (GLUE2 ProxyExpirationTime), raising their revision (`rev`, record.ts; lib/rev.lua).
-- Missing records are not re-created.
-- KEYS[1..n] job record hashes (Keys.job) of the jobs bound to the delegation.
-- ARGV[1] delegation id, ARGV[2] new end time (ms).
-- Returns the number of records updated.
local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'mainDelegation') == ARGV[1] then
    redis.call('HSET', key, 'delegationExpires', ARGV[2])
    bumpRev(key)
    n = n + 1
  end
end
return n
