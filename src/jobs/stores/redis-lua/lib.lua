-- Shared by every script below (prepended to each): key names and the two state moves.
-- KEYS: none. Every script takes the key prefix as ARGV[1] and builds its keys from it, so
--   one Redis server (or primary) is needed, not Redis Cluster.
-- ARGV[1] prefix: the prefix of every key (default "modelport:")
local P = ARGV[1]
local function jk(id) return P .. 'job:' .. id end
local function n2s(x) return string.format('%.0f', x) end
-- owner: the job's owner when the caller read it already (false: none); nil: read here
local function move(id, model, om, old, new, owner)
  if owner == nil then owner = redis.call('HGET', jk(id), 'owner') end
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
local function finish(id, model, om, old, status, now, owner)
  redis.call('ZREM', P .. 'run:' .. model, id)
  redis.call('ZREM', P .. 'q:' .. model, om)
  redis.call('ZREM', P .. 'dly:' .. model, id)
  redis.call('HSET', jk(id), 'finishedAt', now, 'updatedAt', now)
  redis.call('HDEL', jk(id), 'leaseOwner', 'leaseExpiresAt')
  redis.call('ZADD', P .. 'fin', now, id)
  move(id, model, om, old, status, owner)
end
