-- Releases a JEM lease only if the caller still holds it (never deletes another holder's lease).
-- KEYS[1] the lease (Keys.lock). ARGV[1] holder token.
-- Returns 1 released, 0 not held.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
