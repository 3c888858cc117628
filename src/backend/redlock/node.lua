-- node.lua - the one script redlock:// runs on each of its N nodes (README.md).
-- KEYS[1]: the lock's key L = P:{E}; KEYS[2]: the name's fence counter L:fence.
-- ARGV[1] names the step:
--   take TOKEN LEASE_MS OTHER -> {1, counter} taken (or already ours: lease set again);
--                             counter: the fence counter, or the node's clock in µs if higher
--                             {0, counter, pttl} held by another owner
--                             {0, counter, pttl, 1} OTHER, the name's key of the other
--                             layout (the interop key N, or the mutex's L), is held:
--                             one name is one lock. OTHER is looked at with pcall (an
--                             ACL may hide it); '' looks at nothing.
--   fence VALUE            -> 1; the counter becomes max(counter, VALUE)
--   renew TOKEN LEASE_MS AT_LEAST -> 1 ours (lease set; with AT_LEAST only if that
--                             lengthens it; LEASE_MS 0 only confirms), 0 free, -1 another's
--   release TOKEN          -> 1 deleted, 0 free, -1 another's
local op = ARGV[1]
if op == 'take' then
  -- The counter is never below the node's clock in microseconds (as the
  -- Redis backend's fences): a node that comes back without its data, after
  -- the delayed restart the README asks for, starts above every fence given
  -- before it went down, as long as the nodes' clocks agree within that
  -- delay. (Lua's numbers hold microseconds since 1970 exactly.)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if counter < now then
    counter = now
  end
  if ARGV[4] ~= '' then
    local left = redis.pcall('PTTL', ARGV[4])
    if type(left) == 'number' and left ~= -2 then
      return {0, counter, left, 1}
    end
  end
  if redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3]) then
    return {1, counter}
  end
  if redis.call('GET', KEYS[1]) == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, counter}
  end
  return {0, counter, redis.call('PTTL', KEYS[1])}
elseif op == 'fence' then
  local value = tonumber(ARGV[2])
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if value > counter then
    redis.call('SET', KEYS[2], ARGV[2])
  end
  return 1
elseif op == 'renew' then
  local v = redis.call('GET', KEYS[1])
  if v == ARGV[2] then
    local lease = tonumber(ARGV[3])
    if lease > 0 and (ARGV[4] == '0' or redis.call('PTTL', KEYS[1]) < lease) then
      redis.call('PEXPIRE', KEYS[1], lease)
    end
    return 1
  end
  if v then return -1 end
  return 0
elseif op == 'release' then
  local v = redis.call('GET', KEYS[1])
  if v == ARGV[2] then
    redis.call('DEL', KEYS[1])
    return 1
  end
  if v then return -1 end
  return 0
end
return redis.error_reply('redlock node.lua: unknown step ' .. tostring(op))
