-- Cancels a queued job at once; marks a running job for cancellation (its worker stops it).
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] id
-- ARGV[3] now: ms since epoch
-- Returns the job's hash, or false when there is no such job
local id, now = ARGV[2], ARGV[3]
local k = jk(id)
local f = redis.call('HMGET', k, 'status', 'model', 'om', 'cancelRequested')
if not f[1] then return false end
if f[1] == 'queued' then
  finish(id, f[2], f[3], 'queued', 'canceled', now)
elseif f[1] == 'running' and f[4] ~= '1' then
  redis.call('HSET', k, 'cancelRequested', '1', 'updatedAt', now)
end
return redis.call('HGETALL', k)
