-- Token bucket of one client, shared by every gateway. Refills at `rate` tokens/s up to `burst`;
-- Redis TIME is the clock (gateways' clocks may differ). A gateway leases up to `want` tokens per
-- call and spends them locally (ratelimit.ts), so the bucket costs one call per lease, not per request.
-- KEYS[1] the client's bucket hash {tokens, ts} (Keys.rateLimit). ARGV[1] rate (tokens/s),
-- ARGV[2] burst, ARGV[3] tokens wanted (≥ 1).
-- Returns {tokens granted (0..want), milliseconds until one token is available when none was granted}.
local key, rate, burst = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local want = math.max(1, math.floor(tonumber(ARGV[3]) or 1))
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(h[1]) or burst
local ts = tonumber(h[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
local granted, wait = math.min(want, math.floor(tokens)), 0
if granted >= 1 then tokens = tokens - granted else granted = 0; wait = math.ceil((1 - tokens) * 1000 / rate) end
redis.call('HSET', key, 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
return {granted, wait}
