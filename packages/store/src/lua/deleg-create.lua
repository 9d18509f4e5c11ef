-- Creates a delegation slot within the owner's quota, atomically for every gateway.
-- KEYS[1] delegation hash, KEYS[2] the owner's delegation set, KEYS[3] index zset (pending or expiry).
-- ARGV[1] id, ARGV[2] max per owner (0 = none), ARGV[3] index score ('' = not indexed), ARGV[4..] field, value, ...
-- Returns 1 created, 0 id taken, -1 quota reached.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local max = tonumber(ARGV[2])
if max > 0 and redis.call('SCARD', KEYS[2]) >= max then return -1 end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('SADD', KEYS[2], ARGV[1])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1]) end
return 1
