-- REST states of many jobs (bulk status, the CE's hottest read) for one or more status reads:
-- status-many.ts sends the reads waiting together in one call, each as (ownerKey, ids).
-- KEYS[1] the status index of the call's first read (Keys.ownerStates), declared for Cluster
-- routing: every key shares the prefix's hash tag, so the other reads' keys live in the same slot.
-- ARGV[1] key prefix (ceKeys, prepended by scripts.ts). Then per read: ARGV[2k] the caller's
-- ownerKey (keys.ts ownerKey of the records' `owner`), ARGV[2k+1] its ids as one MessagePack array
-- of strings (status-many.ts packKeys): any id travels as it is, and cmsgpack unpacks in C.
-- Per read, ONE HMGET on the caller's own status index (K.ownerStates, kept by create/update/
-- remove.lua): another owner's job is simply not in it. An id not found there (no such job, another
-- owner's, or a record from before the index) is looked up in its record, owner compared by ownerKey.
-- Returns per read ONE string: per id in order, the job's REST state when the job exists and
-- belongs to that owner, else "" (missing and foreign jobs look the same), joined by ",".
-- REST state names never contain ",". No owner crosses the wire back.
local K = ceKeys(ARGV[1])
local res = {}
for g = 2, #ARGV - 1, 2 do
  local ok = ARGV[g]
  local ids = cmsgpack.unpack(ARGV[g + 1])
  local out = {}
  if #ids > 0 then
    local v = redis.call('HMGET', K.ownerStates(ok), unpack(ids))
    for i = 1, #ids do
      local s = v[i]
      if not s then
        local r = redis.call('HMGET', K.job(ids[i]), 'ownerKey', 'rest')
        s = (r[1] == ok and r[2]) or ''
      end
      out[i] = s
    end
  end
  res[#res + 1] = table.concat(out, ',')
end
return res
