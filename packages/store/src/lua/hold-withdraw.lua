-- Withdraws a submission hold: the request's jobs will never run (the JEM fails each one it finds
-- still carrying the hold in its record, holds.ts). Atomic against hold-release.lua: a request is
-- either released or withdrawn, once, whatever the number of gateways and JEMs.
-- KEYS[1] the holds (Keys.holds), KEYS[2] the JEM's due set (Keys.advanceDue), KEYS[3] its bell
-- channel (Keys.advanceBell).
-- ARGV[1] the request key, ARGV[2] now (ms), ARGV[3] 'force' (the gateway: the answer is not a
-- 201, or never left) or 'expired' (the JEM: only once the hold deadline has passed), ARGV[4..] job
-- ids to make due at once when withdrawn (so that the JEM fails them now, not at the deadline).
-- Returns { verdict, deadline }: 'withdrawn' (by this call), 'held' (deadline not reached; nothing
-- changed) or 'ended' (not held: released or withdrawn before); deadline (ms) or false.
local key, now = ARGV[1], tonumber(ARGV[2])
local deadline = redis.call('ZSCORE', KEYS[1], key)
if not deadline then return { 'ended', false } end
if ARGV[3] ~= 'force' and tonumber(deadline) > now then return { 'held', deadline } end
redis.call('ZREM', KEYS[1], key)
if #ARGV >= 4 then
  for i = 4, #ARGV, 2000 do
    local args = {}
    for j = i, math.min(i + 1999, #ARGV) do
      args[#args + 1] = now
      args[#args + 1] = ARGV[j]
    end
    redis.call('ZADD', KEYS[2], 'LT', unpack(args))
  end
  redis.call('PUBLISH', KEYS[3], '1')
end
return { 'withdrawn', deadline }
