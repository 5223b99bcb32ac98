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
  local k = jk(id)
  local f = redis.call('HMGET', k, 'status', 'model', 'om', 'idempotencyKey', 'owner')
  if f[1] == 'succeeded' or f[1] == 'failed' or f[1] == 'canceled' then
    out[#out + 1] = redis.call('HGETALL', k)
    redis.call('DEL', k)
    redis.call('ZREM', P .. 'lall', f[3])
    redis.call('ZREM', P .. 'lm:' .. f[2], f[3])
    redis.call('ZREM', P .. 'ls:' .. f[1], f[3])
    redis.call('ZREM', P .. 'lms:' .. f[2] .. ':' .. f[1], f[3])
    if f[5] then
      redis.call('ZREM', P .. 'lo:' .. f[5], f[3])
      redis.call('ZREM', P .. 'los:' .. f[5] .. ':' .. f[1], f[3])
    end
    if f[4] then
      local ik = P .. 'idem:' .. f[4]
      local v = redis.call('GET', ik)
      if v and cjson.decode(v).j == id then redis.call('DEL', ik) end
    end
  end
end
return {#ids, out}
