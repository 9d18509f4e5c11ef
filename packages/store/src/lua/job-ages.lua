-- Per internal state, for operators' metrics (health.ts jobAges): how many jobs each VO has in it,
-- when the oldest job not parked (pending) entered it, and the soonest delegation expiry among
-- its jobs. Read-only; O(jobs read), bounded by ARGV[2] per state.
-- KEYS[1..] the internal-state sets (Keys.internal), in the order of the answer.
-- ARGV[1] key prefix (ceKeys, prepended by scripts.ts). ARGV[2] the most records read per state.
-- ARGV[3..] the VO names to count by name; a job's VO is the first path segment of its first FQAN
-- (`/atlas/Role=x` → atlas): one of these, `other`, or `none` when the job has no FQAN.
-- Returns per key { read, oldest stateSince (ms) or -1, soonest delegationExpires (ms) or -1,
-- truncated 0|1, vo, count, vo, count, ... }.
local K = ceKeys(ARGV[1])
local max = tonumber(ARGV[2])
local known = {}
for i = 3, #ARGV do known[ARGV[i]] = true end
local res = {}
for k = 1, #KEYS do
  local ids = redis.call('SMEMBERS', KEYS[k])
  local n = math.min(#ids, max)
  local oldest, soonest = -1, -1
  local byVo, order = {}, {}
  for i = 1, n do
    local f = redis.call('HMGET', K.job(ids[i]), 'stateSince', 'pending', 'fqans', 'delegationExpires')
    local since = tonumber(f[1])
    if since and f[2] ~= '1' and (oldest < 0 or since < oldest) then oldest = since end
    local exp = tonumber(f[4])
    if exp and (soonest < 0 or exp < soonest) then soonest = exp end
    local vo = 'none'
    if f[3] then
      local first = string.match(f[3], '^%["/([^/"]+)')
      if first then vo = known[first] and first or 'other' end
    end
    if not byVo[vo] then byVo[vo] = 0; order[#order + 1] = vo end
    byVo[vo] = byVo[vo] + 1
  end
  local row = { n, oldest, soonest, #ids > n and 1 or 0 }
  for _, vo in ipairs(order) do row[#row + 1] = vo; row[#row + 1] = byVo[vo] end
  res[k] = row
end
return res
