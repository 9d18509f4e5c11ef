-- Rings jobs: each id is due at ARGV[1] or at its earlier due time if it has one (ZADD LT), so
-- an event never postpones a look and repeated rings collapse into one member per job.
-- KEYS[1] due set (Keys.advanceDue), KEYS[2] bell channel (Keys.advanceBell).
-- ARGV[1] due time (ms), ARGV[2] now (ms), ARGV[3..] job ids.
-- Returns the number of ids given. Publishes on the bell when anything is due now.
local at = tonumber(ARGV[1])
for i = 3, #ARGV, 2000 do
  local args = {}
  for j = i, math.min(i + 1999, #ARGV) do
    args[#args + 1] = at
    args[#args + 1] = ARGV[j]
  end
  redis.call('ZADD', KEYS[1], 'LT', unpack(args))
end
if at <= tonumber(ARGV[2]) then redis.call('PUBLISH', KEYS[2], '1') end
return #ARGV - 2
