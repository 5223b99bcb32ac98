-- Deletes final jobs that finished before a time, with their index entries and idempotency keys.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] before: finishedAt bound, exclusive (ms since epoch)
-- ARGV[3] limit: most jobs examined in one call
-- Returns {ids examined, {job hash, ...}} (the hashes of the jobs deleted)
local ids = redis.call('ZRANGEBYSCORE', P .. 'fin', '-inf', '(' .. ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', P .. 'fin', id)
  local f = redis.call('HMGET', jk(id), 'status')
  if f[1] == 'succeeded' or f[1] == 'failed' or f[1] == 'canceled' then
    out[#out + 1] = drop(id)
  end
end
return {#ids, out}
