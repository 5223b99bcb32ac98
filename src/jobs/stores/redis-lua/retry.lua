-- Queues a failed or canceled job again with fresh attempts; other states are left alone.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] id
-- ARGV[3] now: ms since epoch
-- Returns the job's hash, or false when there is no such job
local id, now = ARGV[2], ARGV[3]
local k = jk(id)
local f = redis.call('HMGET', k, 'status', 'model', 'om', 'priority')
if not f[1] then return false end
if f[1] == 'failed' or f[1] == 'canceled' then
  redis.call('HSET', k, 'attempts', '0', 'runAt', now, 'updatedAt', now)
  redis.call('HDEL', k, 'finishedAt', 'cancelRequested', 'result', 'resultKey', 'resultBytes', 'leaseOwner', 'leaseExpiresAt')
  redis.call('ZREM', P .. 'fin', id)
  redis.call('ZADD', P .. 'q:' .. f[2], -tonumber(f[4]), f[3])
  move(id, f[2], f[3], f[1], 'queued')
end
return redis.call('HGETALL', k)
