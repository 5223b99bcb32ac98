-- Deletes one final job at once, with its index entries and idempotency key.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] id
-- Returns the job's hash as it was, or false when there is no such job or it is not final
local id = ARGV[2]
local status = redis.call('HGET', jk(id), 'status')
if status ~= 'succeeded' and status ~= 'failed' and status ~= 'canceled' then return false end
redis.call('ZREM', P .. 'fin', id)
return drop(id)
