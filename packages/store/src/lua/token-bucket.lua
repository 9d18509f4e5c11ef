-- Token bucket of one client, shared by every gateway. Refills at `rate` tokens/s up to `burst`;
-- Redis TIME is the clock (gateways' clocks may differ).
-- KEYS[1] the client's bucket hash {tokens, ts} (Keys.rateLimit). ARGV[1] rate (tokens/s), ARGV[2] burst.
-- Returns {allowed (1/0), milliseconds until one token is available}.
local key, rate, burst = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(h[1]) or burst
local ts = tonumber(h[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
local allowed, wait = 0, 0
if tokens >= 1 then allowed = 1; tokens = tokens - 1 else wait = math.ceil((1 - tokens) * 1000 / rate) end
redis.call('HSET', key, 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait}
