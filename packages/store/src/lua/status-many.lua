-- REST states of many jobs (bulk status, the CE's hottest read) for one or more status reads:
-- status-many.ts sends the reads waiting together in one call, each as (owner, job keys).
-- KEYS[1] one job record of the call (Keys.job), declared for Cluster routing only: every key
-- shares the prefix's hash tag, so the records named in ARGV live in the same slot.
-- Then per read: ARGV[2k-1] the caller's identity (the records' `owner`), ARGV[2k] its job
-- records' keys (Keys.job) as one MessagePack array of strings (status-many.ts packKeys).
-- One packed argument instead of one argument per key: building 50 key arguments was a fifth of
-- the gateway's CPU per status request, and cmsgpack unpacks faster than a Lua split.
-- Returns per read ONE string: per key in order, the job's REST state when the record exists and
-- belongs to that owner, else "" (missing and foreign jobs look the same), joined by ",".
-- REST state names never contain ",". No owner DN crosses the wire back.
local res = {}
for g = 1, #ARGV - 1, 2 do
  local owner = ARGV[g]
  local keys = cmsgpack.unpack(ARGV[g + 1])
  local out = {}
  for i = 1, #keys do
    local v = redis.call('HMGET', keys[i], 'owner', 'rest')
    out[i] = (v[1] == owner and v[2]) or ''
  end
  res[#res + 1] = table.concat(out, ',')
end
return res
