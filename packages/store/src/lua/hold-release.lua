-- Releases a submission hold: the gateway has handed the request's whole answer (a 201) to its
-- socket, so the request's jobs may run. One call per request, whatever its number of jobs.
-- KEYS[1] the holds (Keys.holds), KEYS[2] the JEM's due set (Keys.advanceDue), KEYS[3] its bell
-- channel (Keys.advanceBell).
-- ARGV[1] the request key, ARGV[2] now (ms), ARGV[3] due time of jobs admitted at creation (their
-- upload deadline; 0 = none admitted), ARGV[4] key prefix, ARGV[5..] the request's job ids.
-- The record keys (K.job) are built with ceKeys(prefix) (keys.ts; same `{ce}` hash slot).
-- Returns 1 when released, 0 when the request was no longer held (withdrawn: its jobs never run).
-- Per job still carrying this hold: the `hold` field is removed; a job in ACCEPTED is due at once;
-- a job admitted at creation (PREPARING) that nothing rang during the hold (still due at the hold
-- deadline) becomes due at its upload deadline, as if never held; one rung meanwhile (an upload
-- completed) keeps its earlier due time.
local key, now, admittedDue = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local K = ceKeys(ARGV[4])
local deadline = redis.call('ZSCORE', KEYS[1], key)
if not deadline then return 0 end
redis.call('ZREM', KEYS[1], key)
deadline = tonumber(deadline)
local rang = false
for i = 5, #ARGV do
  local id = ARGV[i]
  local job = K.job(id)
  local f = redis.call('HMGET', job, 'hold', 'state')
  if f[1] == key then
    redis.call('HDEL', job, 'hold')
    local due = redis.call('ZSCORE', KEYS[2], id)
    if f[2] == 'PREPARING' and admittedDue > 0 then
      if due and tonumber(due) == deadline then redis.call('ZADD', KEYS[2], admittedDue, id) end
    else
      redis.call('ZADD', KEYS[2], 'LT', now, id)
      rang = true
    end
  end
end
if rang then redis.call('PUBLISH', KEYS[3], '1') end
return 1
