-- Records work already done elsewhere as a succeeded job: never queued, listed and purged as jobs are.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] id
-- ARGV[3] model
-- ARGV[4] om: the order member ("<zero-padded createdAt>:<id>")
-- ARGV[5] now: ms since epoch (created, started and finished)
-- ARGV[6..] field, value, ...: the job hash (status set here)
-- Returns 1 when recorded, 0 when a job with that id exists
local id, model, om, now = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if redis.call('EXISTS', jk(id)) == 1 then return 0 end
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', jk(id), unpack(fields))
redis.call('ZADD', P .. 'lall', 0, om)
redis.call('ZADD', P .. 'lm:' .. model, 0, om)
local owner = redis.call('HGET', jk(id), 'owner')
if owner then redis.call('ZADD', P .. 'lo:' .. owner, 0, om) end
move(id, model, om, false, 'succeeded')
redis.call('ZADD', P .. 'fin', now, id)
return 1
