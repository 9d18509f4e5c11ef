-- Claims up to ARGV[3] due jobs for one JEM: moves them from the due set to the in-flight set
-- with a lease ending at ARGV[2]. Jobs whose lease expired (their JEM died mid-step) are due
-- again first: that is the whole of crash recovery, with no scan over waiting jobs. A job that is
-- in flight elsewhere and rung again stays due until its holder releases it.
-- KEYS[1] due set (Keys.advanceDue), KEYS[2] in-flight set (Keys.advanceInflight).
-- ARGV[1] now (ms), ARGV[2] lease end (ms), ARGV[3] max jobs; optional ARGV[4] = "turn" and
-- ARGV[5..] ids whose looks ended (their leases are released first): the JEM's whole loop turn
-- (release, claim, when to look next) in one round trip.
-- Returns { claimed ids..., } (at most ARGV[3]); with "turn": { { claimed ids... }, earliest due
-- time or false, earliest lease end or false }.
local now, lease, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local turn = ARGV[4] == 'turn'
if turn then
  for i = 5, #ARGV, 2000 do
    redis.call('ZREM', KEYS[2], unpack(ARGV, i, math.min(i + 1999, #ARGV)))
  end
end
local lost = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1000)
for _, id in ipairs(lost) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZADD', KEYS[1], 'LT', now, id)
end
local out = {}
local offset = 0
while #out < max do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', offset, max * 2)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    if #out >= max then break end
    if redis.call('ZSCORE', KEYS[2], id) then
      offset = offset + 1
    else
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZADD', KEYS[2], lease, id)
      out[#out + 1] = id
    end
  end
  if #ids < max * 2 then break end
end
if not turn then return out end
local due = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local held = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return { out, due[2] or false, held[2] or false }
