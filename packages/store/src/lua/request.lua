-- Records a kill/clean/restart request on a job record: the truth behind a 202 (the commands
-- queue is only the doorbell), plus the job's id in the set of open requests that the JEM's
-- recovery pass rings again when a queue message was lost. The record's revision (`rev`, record.ts; lib/rev.lua) goes up.
-- KEYS[1] the record hash (Keys.job), KEYS[2] the open-request set (Keys.requests).
-- ARGV[1] id, ARGV[2] flag field (killRequested | cleanRequested | restartRequested),
-- ARGV[3] space-separated internal states in which the request is a no-op (final states for a kill).
-- Returns 1 recorded, 0 no-op in this state, -1 no such job.
local key = KEYS[1]
local state = redis.call('HGET', key, 'state')
if not state then return -1 end
for s in string.gmatch(ARGV[3], '%S+') do
  if s == state then return 0 end
end
redis.call('HSET', key, ARGV[2], '1')
bumpRev(key)
redis.call('SADD', KEYS[2], ARGV[1])
return 1
