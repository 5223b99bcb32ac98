-- The operations only the lease owner may do on a running job.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] id
-- ARGV[3] worker: must be the lease owner
-- ARGV[4] now: ms since epoch
-- ARGV[5] op: renew | fail | release | markCanceled (results: complete.lua)
-- The rest by op (release and markCanceled take none):
-- ARGV[6] renew: leaseMs; fail: lastError (JSON)
-- ARGV[7] fail: runAt ("" = final failure, else retry at that time)
-- Returns 1 when done, 0 when the job is not running under this worker
local id, worker, now, op = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local k = jk(id)
local f = redis.call('HMGET', k, 'status', 'leaseOwner', 'model', 'om', 'priority', 'attempts')
if f[1] ~= 'running' or f[2] ~= worker then return 0 end
local model, om = f[3], f[4]
if op == 'renew' then
  local exp = tonumber(now) + tonumber(ARGV[6])
  redis.call('HSET', k, 'leaseExpiresAt', n2s(exp), 'updatedAt', now)
  redis.call('ZADD', P .. 'run:' .. model, exp, id)
elseif op == 'fail' then
  redis.call('HSET', k, 'lastError', ARGV[6])
  if ARGV[7] == '' then
    finish(id, model, om, 'running', 'failed', now)
  else
    redis.call('HSET', k, 'runAt', ARGV[7], 'updatedAt', now)
    redis.call('HDEL', k, 'leaseOwner', 'leaseExpiresAt')
    redis.call('ZREM', P .. 'run:' .. model, id)
    redis.call('ZADD', P .. 'dly:' .. model, ARGV[7], id)
    move(id, model, om, 'running', 'queued')
  end
elseif op == 'release' then
  local attempts = math.max(tonumber(f[6]) - 1, 0)
  redis.call('HSET', k, 'attempts', attempts, 'updatedAt', now)
  redis.call('HDEL', k, 'leaseOwner', 'leaseExpiresAt')
  redis.call('ZREM', P .. 'run:' .. model, id)
  redis.call('ZADD', P .. 'q:' .. model, -tonumber(f[5]), om)
  move(id, model, om, 'running', 'queued')
elseif op == 'markCanceled' then
  finish(id, model, om, 'running', 'canceled', now)
else
  return redis.error_reply('unknown op ' .. op)
end
return 1
