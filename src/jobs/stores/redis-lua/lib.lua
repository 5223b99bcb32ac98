-- Shared by every script below (prepended to each): key names and the two state moves.
-- KEYS: none. Every script takes the key prefix as ARGV[1] and builds its keys from it, so
--   one Redis server (or primary) is needed, not Redis Cluster.
-- ARGV[1] prefix: the prefix of every key (default "modelport:")
local P = ARGV[1]
local function jk(id) return P .. 'job:' .. id end
local function n2s(x) return string.format('%.0f', x) end
local function move(id, model, om, old, new)
  local owner = redis.call('HGET', jk(id), 'owner')
  if old then
    redis.call('ZREM', P .. 'ls:' .. old, om)
    redis.call('ZREM', P .. 'lms:' .. model .. ':' .. old, om)
    if owner then redis.call('ZREM', P .. 'los:' .. owner .. ':' .. old, om) end
  end
  redis.call('ZADD', P .. 'ls:' .. new, 0, om)
  redis.call('ZADD', P .. 'lms:' .. model .. ':' .. new, 0, om)
  if owner then redis.call('ZADD', P .. 'los:' .. owner .. ':' .. new, 0, om) end
  redis.call('HSET', jk(id), 'status', new)
end
local function finish(id, model, om, old, status, now)
  redis.call('ZREM', P .. 'run:' .. model, id)
  redis.call('ZREM', P .. 'q:' .. model, om)
  redis.call('ZREM', P .. 'dly:' .. model, id)
  redis.call('HSET', jk(id), 'finishedAt', now, 'updatedAt', now)
  redis.call('HDEL', jk(id), 'leaseOwner', 'leaseExpiresAt')
  redis.call('ZADD', P .. 'fin', now, id)
  move(id, model, om, old, status)
end
-- Deletes a job's hash, its list entries and its idempotency key (when still its own); returns
-- the hash as it was. The job's queue and purge entries are the caller's.
local function drop(id)
  local k = jk(id)
  local f = redis.call('HMGET', k, 'status', 'model', 'om', 'idempotencyKey', 'owner')
  local hash = redis.call('HGETALL', k)
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
  return hash
end
