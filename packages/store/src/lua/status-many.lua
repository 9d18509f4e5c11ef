-- Owner and REST state of many jobs in one command (bulk status, the CE's hottest read): one
-- script call instead of one HMGET per id through the client.
-- KEYS[1..n] the job records (Keys.job). No ARGV.
-- Returns a flat array: owner_i, rest_i for each key in order (false when the job does not exist).
local out = {}
for i = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[i], 'owner', 'rest')
  out[#out + 1] = v[1]
  out[#out + 1] = v[2]
end
return out
