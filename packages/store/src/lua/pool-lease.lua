-- Lease one account of a pool to one grid identity, atomically.
-- KEYS[1] HASH account -> identity (every pool)
-- KEYS[2] HASH pool -> account of this identity (`~account` -> account: retired, still leased)
-- KEYS[3] ZSET identity -> last lease time
-- ARGV[1] identity, ARGV[2] pool name, ARGV[3] now (ms), ARGV[4..] the pool's accounts in order
-- Returns the account, or false when every account is held by another identity.
-- Without ARGV[4..]: renewal of the identity's current account only (see below).
local leases, held, touched = KEYS[1], KEYS[2], KEYS[3]
local identity, pool, now = ARGV[1], ARGV[2], ARGV[3]
local cur = redis.call('HGET', held, pool)
if #ARGV == 3 then
  -- Renewal only (no account list sent): the identity's current account, or false. The caller
  -- checks it is still in the pool and otherwise calls again with the list.
  if cur and redis.call('HGET', leases, cur) == identity then
    redis.call('ZADD', touched, now, identity)
    return cur
  end
  return false
end
if cur and redis.call('HGET', leases, cur) == identity then
  for i = 4, #ARGV do
    if ARGV[i] == cur then
      redis.call('ZADD', touched, now, identity)
      return cur
    end
  end
  -- The account left the pool's configuration: keep it leased (jobs may still run as it) under a
  -- retired field that release frees, and lease a current one.
  redis.call('HSET', held, '~' .. cur, cur)
end
for i = 4, #ARGV do
  local account = ARGV[i]
  if redis.call('HSETNX', leases, account, identity) == 1 then
    redis.call('HSET', held, pool, account)
    redis.call('ZADD', touched, now, identity)
    return account
  end
  -- The identity may already hold this account through another pool listing it.
  if redis.call('HGET', leases, account) == identity then
    redis.call('HSET', held, pool, account)
    redis.call('ZADD', touched, now, identity)
    return account
  end
end
return false
