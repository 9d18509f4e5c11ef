-- Fixed one-minute window counter: counts the call when under the limit.
-- KEYS[1] the window's counter; ARGV[1] limit, ARGV[2] window ms.
-- Returns the count after this call, or -1 when the limit was already reached.
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[1]) then return -1 end
n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return n
