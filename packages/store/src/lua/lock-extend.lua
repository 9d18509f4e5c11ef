-- Extends a JEM lease if the caller still holds it (token check), so a lease lost to expiry is never
-- extended on behalf of its new holder.
-- KEYS[1] the lease (Keys.lock). ARGV[1] holder token, ARGV[2] ttl ms.
-- Returns 1 extended, 0 not held.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
