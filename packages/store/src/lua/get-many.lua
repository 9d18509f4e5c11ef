-- Whole job records of many jobs in one command (bulk info, kill/clean/restart, listings): one
-- script call instead of one HGETALL per id through the client.
-- KEYS[1..n] the job records (Keys.job). No ARGV.
-- Returns ONE JSON string: an array with one flat [field, value, ...] array per key, in order
-- (`{}` for a job that does not exist: cjson's empty table). One string parsed by JSON.parse costs
-- the client a third of the CPU of thousands of RESP bulk strings (bench: 0.64 vs 1.9 ms for 100 jobs).
local out = {}
for i = 1, #KEYS do out[i] = redis.call('HGETALL', KEYS[i]) end
return cjson.encode(out)
