-- Hands the best runnable jobs (up to max, each as one claim would pick it) of the given models to
-- one worker with a lease: delayed jobs
-- that are due move to the queue first; a running job whose lease lapsed competes too (it is
-- re-run, or failed/canceled when it has no attempt left or a cancel was asked for).
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] worker: the worker id that will hold the lease
-- ARGV[3] leaseMs
-- ARGV[4] now: ms since epoch
-- ARGV[5] max: how many jobs at most
-- ARGV[6..] model: the models the worker serves
-- Returns the claimed jobs' hashes in claim order (an empty list when none is runnable)
local worker, leaseMs, now, max = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local models = {}
for i = 6, #ARGV do models[#models + 1] = ARGV[i] end
local out = {}
for _, m in ipairs(models) do
  local dk = P .. 'dly:' .. m
  local due = redis.call('ZRANGEBYSCORE', dk, '-inf', now, 'LIMIT', 0, 500)
  for _, id in ipairs(due) do
    local f = redis.call('HMGET', jk(id), 'priority', 'om')
    if f[2] then redis.call('ZADD', P .. 'q:' .. m, -tonumber(f[1]), f[2]) end
    redis.call('ZREM', dk, id)
  end
end
local function better(a, b)
  if not b then return true end
  if a.prio ~= b.prio then return a.prio > b.prio end
  if a.created ~= b.created then return a.created < b.created end
  return a.id < b.id
end
for _ = 1, 10000 + max do
  local best = false
  for _, m in ipairs(models) do
    local top = redis.call('ZRANGE', P .. 'q:' .. m, 0, 0, 'WITHSCORES')
    if top[1] then
      local om = top[1]
      local sep = string.find(om, ':', 1, true)
      local c = {kind = 'q', model = m, om = om, prio = -tonumber(top[2]),
        created = tonumber(string.sub(om, 1, sep - 1)), id = string.sub(om, sep + 1)}
      if better(c, best) then best = c end
    end
    local rk = P .. 'run:' .. m
    local lapsed = redis.call('ZRANGEBYSCORE', rk, '-inf', now, 'LIMIT', 0, 100)
    for _, id in ipairs(lapsed) do
      local f = redis.call('HMGET', jk(id), 'priority', 'createdAt', 'om')
      if f[3] then
        local c = {kind = 'r', model = m, om = f[3], prio = tonumber(f[1]), created = tonumber(f[2]), id = id}
        if better(c, best) then best = c end
      else
        redis.call('ZREM', rk, id)
      end
    end
  end
  if not best then return out end
  local k = jk(best.id)
  local proceed = true
  if best.kind == 'q' then
    redis.call('ZREM', P .. 'q:' .. best.model, best.om)
    local f = redis.call('HMGET', k, 'runAt', 'owner')
    best.owner = f[2]
    local runAt = tonumber(f[1])
    if runAt > now then
      redis.call('ZADD', P .. 'dly:' .. best.model, runAt, best.id)
      proceed = false
    end
  else
    local f = redis.call('HMGET', k, 'cancelRequested', 'attempts', 'maxAttempts', 'leaseOwner', 'leaseExpiresAt')
    if f[1] == '1' then
      finish(best.id, best.model, best.om, 'running', 'canceled', ARGV[4])
      proceed = false
    elseif tonumber(f[2]) + 1 > tonumber(f[3]) then
      local msg = 'the worker holding the lease stopped (' .. (f[4] or 'unknown worker') .. ', lease lapsed at ' ..
        (f[5] or '?') .. ') and the job has no attempt left (attempt ' .. f[2] .. ' of ' .. f[3] .. ')'
      redis.call('HSET', k, 'lastError', cjson.encode({code = 'MP_ERR_RUNNER_CRASHED', message = msg}))
      finish(best.id, best.model, best.om, 'running', 'failed', ARGV[4])
      proceed = false
    end
  end
  if proceed then
    local exp = now + leaseMs
    redis.call('HINCRBY', k, 'attempts', 1)
    redis.call('HSET', k, 'leaseOwner', worker, 'leaseExpiresAt', n2s(exp), 'startedAt', ARGV[4], 'updatedAt', ARGV[4])
    redis.call('ZADD', P .. 'run:' .. best.model, exp, best.id)
    if best.kind == 'q' then move(best.id, best.model, best.om, 'queued', 'running', best.owner) end
    out[#out + 1] = redis.call('HGETALL', k)
    if #out >= max then return out end
  end
end
return out
