-- How many jobs are in each status.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2..] status
-- Returns one count per status, in order
local out = {}
for i = 2, #ARGV do out[#out + 1] = redis.call('ZCARD', P .. 'ls:' .. ARGV[i]) end
return out
