-- Takes a JEM lease: free, or left by a lease of the same owner (one Locks instance, one process)
-- that the owner no longer holds — a release that never reached Redis (the connection dropped) or
-- was lost with an asynchronously replicated write at a failover. The caller checks first that no
-- live lease of its own holds the key, so taking the leftover never cuts a holder short.
-- KEYS[1] the lease (Keys.lock). ARGV[1] new holder token ("<owner>:<random>"), ARGV[2] ttl ms,
-- ARGV[3] owner prefix ("<owner>:").
-- Returns 1 taken, 0 held by another owner.
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #ARGV[3]) ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
