-- One page of job summaries (no input, no result) from a list index, newest first.
-- KEYS: none (see lib.lua)
-- ARGV[1] prefix
-- ARGV[2] index: the index key after the prefix (lall, lm:{model}, ls:{status}, lms:{model}:{status},
--   lo:{owner}, los:{owner}:{status})
-- ARGV[3] max: the lexical upper bound ("+" or "(" .. the last order member seen)
-- ARGV[4] limit: page size + 1
-- ARGV[5] model: only jobs of this model ("" for all). An owner's index holds every model, so
--   these are filtered here, looking at no more than 10 × limit jobs per call.
-- Returns {order members, {summary hash, ...}, last}, aligned; last is the last order member
--   looked at when the look-at bound cut the page short (the next page starts after it), else nil
local limit = tonumber(ARGV[4])
local model = ARGV[5]
local function summary(om)
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
  return s
end
if model == '' then
  local oms = redis.call('ZREVRANGEBYLEX', P .. ARGV[2], ARGV[3], '-', 'LIMIT', 0, limit)
  local out = {}
  for i, om in ipairs(oms) do out[i] = summary(om) end
  return {oms, out}
end
local oms, out = {}, {}
local max = ARGV[3]
local budget = limit * 10
local last = false
local exhausted = false
while #oms < limit and budget > 0 do
  local chunk = redis.call('ZREVRANGEBYLEX', P .. ARGV[2], max, '-', 'LIMIT', 0, math.min(limit, budget))
  if #chunk == 0 then
    exhausted = true
    break
  end
  for _, om in ipairs(chunk) do
    budget = budget - 1
    last = om
    local sep = string.find(om, ':', 1, true)
    if redis.call('HGET', jk(string.sub(om, sep + 1)), 'model') == model then
      oms[#oms + 1] = om
      out[#out + 1] = summary(om)
      if #oms >= limit then break end
    end
  end
  max = '(' .. last
end
if #oms >= limit or exhausted then return {oms, out} end
return {oms, out, last}
