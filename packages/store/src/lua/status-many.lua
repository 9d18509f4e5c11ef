-- REST state of many jobs of one owner in one command (bulk status, the CE's hottest read).
-- KEYS[1..n] the job records (Keys.job). ARGV[1] the caller's identity (the records' `owner`).
-- Returns ONE string: per key in order, the job's REST state when the record exists and belongs
-- to ARGV[1], else "" (missing and foreign jobs look the same), joined by ",". REST state names
-- never contain ",". One string instead of two bulk strings per job: the client parses one reply
-- and no owner DN crosses the wire (bench: client CPU per status of 50, 61 → 27 µs; Redis 94 → 74 µs).
local owner = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[i], 'owner', 'rest')
  out[i] = (v[1] == owner and v[2]) or ''
end
return table.concat(out, ',')
