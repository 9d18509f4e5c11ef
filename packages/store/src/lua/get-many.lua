-- Whole job records of many jobs in one command (bulk info, kill/clean/restart, listings): one
-- script call instead of one HGETALL per id through the client.
-- KEYS[1..n] the job records (Keys.job). No ARGV.
-- Returns one flat field/value array per key, in order (empty for a job that does not exist).
local out = {}
for i = 1, #KEYS do out[i] = redis.call('HGETALL', KEYS[i]) end
return out
