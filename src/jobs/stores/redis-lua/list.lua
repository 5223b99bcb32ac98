-- One page of job summaries (no input, no result) from a list index, newest first.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] index: the index key after the prefix (lall, lm:{model}, ls:{status}, lms:{model}:{status})
-- ARGV[3] max: the lexical upper bound ("+" or "(" .. the last order member seen)
-- ARGV[4] limit: page size + 1
-- Returns {order members, {summary hash, ...}}, aligned
local oms = redis.call('ZREVRANGEBYLEX', P .. ARGV[2], ARGV[3], '-', 'LIMIT', 0, tonumber(ARGV[4]))
local out = {}
for i, om in ipairs(oms) do
  local sep = string.find(om, ':', 1, true)
  -- Summaries: a page never carries inputs or results.
  local h = redis.call('HGETALL', jk(string.sub(om, sep + 1)))
  local s = {}
  for j = 1, #h, 2 do
    if h[j] ~= 'input' and h[j] ~= 'result' then
      s[#s + 1] = h[j]
      s[#s + 1] = h[j + 1]
    end
  end
  out[i] = s
end
return {oms, out}
