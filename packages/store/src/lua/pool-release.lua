-- Release every pool lease of one identity once it has no job left but WIPED ones.
-- KEYS[1] HASH account -> identity   KEYS[2] HASH pool -> account of this identity
-- KEYS[3] ZSET identity -> last lease time
-- KEYS[4] ZSET of the identity's job ids (job store)   KEYS[5] SET of its WIPED job ids (job store)
-- ARGV[1] identity, ARGV[2] now (ms), ARGV[3] grace (ms): a lease used this recently may belong
-- to a submission that has not committed its jobs yet.
-- Returns the number of accounts released, -1 jobs remain, -2 within the grace time.
local leases, held, touched, jobs, wiped = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local identity, now, grace = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('ZCARD', jobs) - redis.call('SCARD', wiped) > 0 then return -1 end
local t = redis.call('ZSCORE', touched, identity)
if t and now - tonumber(t) < grace then return -2 end
local n = 0
local pairs_ = redis.call('HGETALL', held)
for i = 2, #pairs_, 2 do
  local account = pairs_[i]
  if redis.call('HGET', leases, account) == identity then
    redis.call('HDEL', leases, account)
    n = n + 1
  end
end
redis.call('DEL', held)
redis.call('ZREM', touched, identity)
return n
