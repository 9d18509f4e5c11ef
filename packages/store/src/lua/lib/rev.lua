-- Not a script of its own: scripts.ts prepends it to the scripts marked `bumpsRev` (those that
-- change job records). bumpRev raises a record's revision (`rev`, record.ts) to the server clock
-- in microseconds, or the old value + 1 when the clock is not ahead of it: on one server it only
-- goes up, and after a failover to a replica that missed writes it does not come back to a value
-- a reader already saw with other content (which a plain counter would).
local function bumpRev(key)
  local t = redis.call('TIME')
  local rev = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local old = tonumber(redis.call('HGET', key, 'rev') or '0') or 0
  if rev <= old then rev = old + 1 end
  redis.call('HSET', key, 'rev', string.format('%.0f', rev))
end
