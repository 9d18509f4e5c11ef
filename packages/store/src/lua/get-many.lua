-- Job records of many jobs in one command (bulk info, kill/clean/restart, listings): one script
-- call instead of one command per id through the client.
-- KEYS[1..n] the job records (Keys.job). ARGV: field names, or none for whole records.
-- Returns ONE JSON string: an array with one entry per key, in order. Without ARGV a flat
-- [field, value, ...] array (HGETALL; `{}` for a job that does not exist: cjson's empty table);
-- with ARGV the values of those fields (HMGET; false for an absent field or job). One string
-- parsed by JSON.parse costs the client a third of the CPU of thousands of RESP bulk strings
-- (bench: 0.64 vs 1.9 ms for 100 jobs); HMGET of bulk info's 27 fields costs Redis 0.59 ms per
-- 100 jobs where HGETALL costs 0.79 (the encoding is smaller by the names and unread fields).
local out = {}
if #ARGV == 0 then
  for i = 1, #KEYS do out[i] = redis.call('HGETALL', KEYS[i]) end
else
  for i = 1, #KEYS do out[i] = redis.call('HMGET', KEYS[i], unpack(ARGV)) end
end
return cjson.encode(out)
