-- Creates a queued job, or answers the job an unexpired idempotency key already points to.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] id: the new job's id
-- ARGV[3] model
-- ARGV[4] om: the order member ("<zero-padded createdAt>:<id>")
-- ARGV[5] score: -priority (the queue's score)
-- ARGV[6] hasKey: "1" when the job has an idempotency key
-- ARGV[7] key: the idempotency key
-- ARGV[8] hasHash: "1" when the request hash is given
-- ARGV[9] hash: the request body's hash
-- ARGV[10] now: ms since epoch
-- ARGV[11] expiresAt: when the idempotency key stops protecting (ms since epoch)
-- ARGV[12] pxMs: the key's Redis expiry (ms)
-- ARGV[13..] field, value, ...: the job hash
-- Returns {'created'} | {'existing', job hash} | {'conflict', job id} | {'exists'}
local id, model, om = ARGV[2], ARGV[3], ARGV[4]
local hasKey, key = ARGV[6] == '1', ARGV[7]
local hash = false
if ARGV[8] == '1' then hash = ARGV[9] end
local now = ARGV[10]
if hasKey then
  local v = redis.call('GET', P .. 'idem:' .. key)
  if v then
    local d = cjson.decode(v)
    if tonumber(d.e) > tonumber(now) and redis.call('EXISTS', jk(d.j)) == 1 then
      if (d.h or false) ~= hash then return {'conflict', d.j} end
      return {'existing', redis.call('HGETALL', jk(d.j))}
    end
  end
end
if redis.call('EXISTS', jk(id)) == 1 then return {'exists'} end
local fields = {}
for i = 13, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', jk(id), unpack(fields))
redis.call('ZADD', P .. 'q:' .. model, ARGV[5], om)
redis.call('ZADD', P .. 'lall', 0, om)
redis.call('ZADD', P .. 'lm:' .. model, 0, om)
local owner = redis.call('HGET', jk(id), 'owner')
if owner then redis.call('ZADD', P .. 'lo:' .. owner, 0, om) end
move(id, model, om, false, 'queued')
if hasKey then
  local d = {j = id, e = ARGV[11]}
  if hash then d.h = hash end
  redis.call('SET', P .. 'idem:' .. key, cjson.encode(d), 'PX', ARGV[12])
end
return {'created'}
