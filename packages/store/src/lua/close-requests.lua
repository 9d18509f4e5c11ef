-- Forgets answered kill/clean/restart requests, but only for records that still look exactly as
-- the caller saw them when it decided "answered": a request the gateway recorded in between
-- (request.lua: flag + SADD) keeps its id in the set, so the next recovery pass still rings it.
-- KEYS[1] the open-request set (Keys.requests), KEYS[2..n] the record hashes (Keys.job), one per id.
-- ARGV[2i-1] id, ARGV[2i] "<state>|<kill>|<clean>|<restart>" as seen (flags "1" or "").
-- Returns the number of ids removed.
local removed = 0
for i = 2, #KEYS do
  local id = ARGV[2 * (i - 1) - 1]
  local seen = ARGV[2 * (i - 1)]
  local f = redis.call('HMGET', KEYS[i], 'state', 'killRequested', 'cleanRequested', 'restartRequested')
  local now = ''
  if f[1] then
    local function flag(v) if v == '1' then return '1' end return '' end
    now = f[1] .. '|' .. flag(f[2]) .. '|' .. flag(f[3]) .. '|' .. flag(f[4])
  end
  if now == seen then
    removed = removed + redis.call('SREM', KEYS[1], id)
  end
end
return removed
