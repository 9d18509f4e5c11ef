-- Records a kill/clean/restart request on a job record and rings the job on the JEM's work list,
-- in one step: the truth behind a 202 is the record, and a recorded request is always due for a
-- look. The id also goes into the set of open requests, which the JEM's recovery pass rings again
-- until the request is answered. The record's revision (`rev`, record.ts; lib/rev.lua) goes up.
-- KEYS[1] the record hash (Keys.job), KEYS[2] the open-request set (Keys.requests),
-- KEYS[3] the work list's due set (Keys.advanceDue).
-- ARGV[1] id, ARGV[2] flag field (killRequested | cleanRequested | restartRequested),
-- ARGV[3] space-separated internal states in which the request is a no-op (final states for a kill),
-- ARGV[4] now (ms): the due time (an earlier one already there is kept).
-- Returns 1 recorded, 0 no-op in this state, -1 no such job. The caller rings the bell.
local key = KEYS[1]
local state = redis.call('HGET', key, 'state')
if not state then return -1 end
for s in string.gmatch(ARGV[3], '%S+') do
  if s == state then return 0 end
end
redis.call('HSET', key, ARGV[2], '1')
bumpRev(key)
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], 'LT', tonumber(ARGV[4]), ARGV[1])
return 1
