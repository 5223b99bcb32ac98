-- Records the results of running jobs, each only when its worker still holds the lease.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] now: ms since epoch
-- Then, per job, 7 values: id, worker (must be the lease owner), hasResult ("1"), result (inline),
--   hasResultKey ("1"), resultKey (the blob holding the result), resultBytes
-- Returns per job 1 when recorded, 0 when the job is not running under that worker
local now = ARGV[2]
local out = {}
for i = 3, #ARGV, 7 do
  local id, worker = ARGV[i], ARGV[i + 1]
  local k = jk(id)
  local f = redis.call('HMGET', k, 'status', 'leaseOwner', 'model', 'om', 'owner')
  if f[1] ~= 'running' or f[2] ~= worker then
    out[#out + 1] = 0
  else
    if ARGV[i + 2] == '1' then redis.call('HSET', k, 'result', ARGV[i + 3]) else redis.call('HDEL', k, 'result') end
    if ARGV[i + 4] == '1' then redis.call('HSET', k, 'resultKey', ARGV[i + 5]) else redis.call('HDEL', k, 'resultKey') end
    redis.call('HSET', k, 'resultBytes', ARGV[i + 6])
    finish(id, f[3], f[4], 'running', 'succeeded', now, f[5])
    out[#out + 1] = 1
  end
end
return out
