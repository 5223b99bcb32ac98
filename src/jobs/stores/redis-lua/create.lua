-- Creates queued jobs in order, each answered as on its own: a new job, or the job an unexpired
-- idempotency key already points to (a key set by an earlier job of the same call counts).
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] now: ms since epoch
-- ARGV[3] jobs: a JSON array, per job {id, model, om (the order member "<zero-padded
--   createdAt>:<id>"), score (-priority, the queue's score), key? (the idempotency key), hash?
--   (the request hash), expiresAt (when the key stops protecting, ms since epoch), pxMs (the key's
--   Redis expiry, ms), fields (the job hash: field -> text)}
-- Returns per job {'created'} | {'existing', job hash} | {'conflict', job id} | {'exists'}
local now = ARGV[2]
local function create(id, model, om, score, hasKey, key, hash, expiresAt, pxMs, fields)
  -- The owner among the fields (they hold status 'queued' already).
  local owner = false
  for j = 1, #fields, 2 do if fields[j] == 'owner' then owner = fields[j + 1] end end
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
  redis.call('HSET', jk(id), unpack(fields))
  redis.call('ZADD', P .. 'q:' .. model, score, om)
  redis.call('ZADD', P .. 'lall', 0, om)
  redis.call('ZADD', P .. 'lm:' .. model, 0, om)
  if owner then redis.call('ZADD', P .. 'lo:' .. owner, 0, om) end
  redis.call('ZADD', P .. 'ls:queued', 0, om)
  redis.call('ZADD', P .. 'lms:' .. model .. ':queued', 0, om)
  if owner then redis.call('ZADD', P .. 'los:' .. owner .. ':queued', 0, om) end
  if hasKey then
    local d = {j = id, e = expiresAt}
    if hash then d.h = hash end
    redis.call('SET', P .. 'idem:' .. key, cjson.encode(d), 'PX', pxMs)
  end
  return {'created'}
end
local out = {}
for _, j in ipairs(cjson.decode(ARGV[3])) do
  local fields = {}
  for k, v in pairs(j.fields) do
    fields[#fields + 1] = k
    fields[#fields + 1] = v
  end
  out[#out + 1] = create(j.id, j.model, j.om, j.score, j.key ~= nil, j.key, j.hash or false, j.expiresAt, j.pxMs,
    fields)
end
return out
