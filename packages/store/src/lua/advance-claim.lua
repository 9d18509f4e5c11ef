-- Claims up to ARGV[3] due jobs for one JEM: moves them from the due set to the in-flight set
-- with a lease ending at ARGV[2]. Jobs whose lease expired (their JEM died mid-step) are due
-- again first: that is the whole of crash recovery, with no scan over waiting jobs. A job that is
-- in flight elsewhere and rung again stays due until its holder releases it.
-- KEYS[1] due set (Keys.advanceDue), KEYS[2] in-flight set (Keys.advanceInflight).
-- ARGV[1] now (ms), ARGV[2] lease end (ms), ARGV[3] max jobs.
-- Returns { claimed ids..., } (at most ARGV[3]).
local now, lease, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
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
return out
