-- Ends a look: releases its job lease (only if the caller still holds it, as lock-release.lua)
-- and rings the job at its next due time (as advance-ring.lua: ZADD LT, an earlier due time
-- wins; the bell when due now). The ring happens whether or not the lease was still held.
-- KEYS[1] the lease (Keys.lock), KEYS[2] due set (Keys.advanceDue), KEYS[3] bell channel
-- (Keys.advanceBell). ARGV[1] holder token, ARGV[2] due time (ms), ARGV[3] now (ms), ARGV[4] job id.
-- Returns 1 released, 0 not held.
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then released = redis.call('DEL', KEYS[1]) end
redis.call('ZADD', KEYS[2], 'LT', tonumber(ARGV[2]), ARGV[4])
if tonumber(ARGV[2]) <= tonumber(ARGV[3]) then redis.call('PUBLISH', KEYS[3], '1') end
return released
