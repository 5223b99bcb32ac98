-- Records a job's webhook delivery state, when the job still exists.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] id
-- ARGV[3] webhook: the delivery state (JSON)
-- Returns 1
if redis.call('EXISTS', jk(ARGV[2])) == 1 then redis.call('HSET', jk(ARGV[2]), 'webhook', ARGV[3]) end
return 1
