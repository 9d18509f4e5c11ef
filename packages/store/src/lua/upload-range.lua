-- Merges the received byte range [s,e) of one file into its stored range list (sorted, disjoint,
-- adjacent ranges coalesced), bounded: at most maxRanges ranges per file and maxFiles files per
-- job, so the work per call is O(maxRanges) whatever the client sends. A different total restarts
-- the bookkeeping (a new upload of the file).
-- KEYS[1] the job's upload hash; ARGV[1] path, ARGV[2] s, ARGV[3] e, ARGV[4] total, ARGV[5] ttl ms,
-- ARGV[6] maxRanges, ARGV[7] maxFiles.
-- Stored value: "total|s1,e1,s2,e2,..." (integers printed exactly, never as floats).
-- Returns 1 complete (bookkeeping removed), 0 recorded, -1 too many ranges, -2 too many files.
local s, e, total = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local maxRanges, maxFiles = tonumber(ARGV[6]), tonumber(ARGV[7])
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local old = {}
if raw then
  local t, list = string.match(raw, '^(%d+)|([%d,]*)$')
  if t and tonumber(t) == total then
    for a, b in string.gmatch(list, '(%d+),(%d+)') do old[#old + 1] = {tonumber(a), tonumber(b)} end
  end
elseif redis.call('HLEN', KEYS[1]) >= maxFiles then
  return -2
end
-- One linear pass: ranges before [s,e), the union of those touching it, ranges after.
local merged, placed = {}, false
for _, r in ipairs(old) do
  if r[2] < s then
    merged[#merged + 1] = r
  elseif r[1] > e then
    if not placed then merged[#merged + 1] = {s, e}; placed = true end
    merged[#merged + 1] = r
  else
    if r[1] < s then s = r[1] end
    if r[2] > e then e = r[2] end
  end
end
if not placed then merged[#merged + 1] = {s, e} end
if #merged > maxRanges then return -1 end
if #merged == 1 and merged[1][1] <= 0 and merged[1][2] >= total then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
local parts = {}
for i, r in ipairs(merged) do parts[i] = string.format('%.0f,%.0f', r[1], r[2]) end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', total) .. '|' .. table.concat(parts, ','))
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 0
