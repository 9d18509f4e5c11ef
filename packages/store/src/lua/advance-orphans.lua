-- Ends the in-flight leases (advance set) that no look holds: a look always holds its job's lease
-- (Keys.lock("job:<id>")) while it works, so an in-flight member without one is a release that a
-- failover lost (written to the old primary, never replicated) — or a look between its claim and
-- its lock, which loses nothing by it (the job is simply claimable again; the lock still keeps
-- one look at a time). Bounded: the in-flight set holds at most the JEMs' looks.
-- KEYS[1] in-flight set (Keys.advanceInflight). ARGV[1] the job lock key prefix (Keys.lock("job:")),
-- under the same hash tag.
-- Returns { dropped ids... }.
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if redis.call('EXISTS', ARGV[1] .. id) == 0 then
    redis.call('ZREM', KEYS[1], id)
    out[#out + 1] = id
  end
end
return out
