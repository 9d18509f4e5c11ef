-- Sums the cardinalities of sets (e.g. an owner's per-state sets for the per-owner limit): one
-- command instead of one SCARD per set.
-- KEYS[1..] the sets. No ARGV. Returns the sum (missing sets count 0).
local n = 0
for i = 1, #KEYS do n = n + redis.call('SCARD', KEYS[i]) end
return n
