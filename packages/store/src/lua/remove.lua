-- Remove a job record and every index entry (clean, or end of the WIPED retention).
-- ARGV[1] prefix, ARGV[2] id. Returns 1 removed, 0 no such job.
local prefix, id = ARGV[1], ARGV[2]
local key = prefix .. ':job:' .. id
local cur = redis.call('HMGET', key, 'state', 'rest', 'ownerKey', 'delegations')
if not cur[3] then return 0 end
local ok = cur[3]
redis.call('SREM', prefix .. ':i:' .. cur[1], id)
redis.call('SREM', prefix .. ':r:' .. cur[2], id)
redis.call('SREM', prefix .. ':o:' .. ok .. ':s:' .. cur[2], id)
redis.call('ZREM', prefix .. ':o:' .. ok, id)
redis.call('ZREM', prefix .. ':all', id)
redis.call('ZREM', prefix .. ':expiry', id)
if cur[4] and cur[4] ~= '' then
  for d in string.gmatch(cur[4], '[^,]+') do redis.call('SREM', prefix .. ':d:' .. d .. ':jobs', id) end
end
-- Its uploaded session bytes no longer count against the owner's quota; range bookkeeping goes too.
local sb = prefix .. ':o:' .. ok .. ':sb'
local bytes = tonumber(redis.call('HGET', sb, id) or '0')
if bytes ~= 0 then redis.call('HINCRBY', sb, '*', -bytes) end
redis.call('HDEL', sb, id)
redis.call('DEL', prefix .. ':up:' .. id)
redis.call('DEL', key)
return 1
