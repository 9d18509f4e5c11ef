-- Takes a job's JEM lease as lock-acquire.lua does and, when taken, reads the job's record in
-- the same call (a look's first two round trips in one; the record is read under the lease).
-- KEYS[1] the lease (Keys.lock), KEYS[2] the job record (Keys.job). ARGV[1] new holder token
-- ("<owner>:<random>"), ARGV[2] ttl ms, ARGV[3] owner prefix ("<owner>:").
-- Returns 0 held by another owner, or { 1, { field, value, ... } } (empty when no record).
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #ARGV[3]) ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return { 1, redis.call('HGETALL', KEYS[2]) }
