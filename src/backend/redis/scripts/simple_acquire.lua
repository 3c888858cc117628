-- Interop mode: the lock is the string KEYS[1] holding the owner token, as
-- SET NX PX makes it (redis-py Lock, node-redlock, redsync). KEYS[2] fence
-- counter. ARGV[1] owner token, ARGV[2] lease ms, ARGV[3] holds the caller
-- has. Returns {1, fence, 1} taken, {1, 0, 0} re-entered (fence unchanged),
-- {0, holder_ttl, 0} held by someone else, {-1} lost.
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  if tonumber(ARGV[3]) > 0 then
    if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
    end
    return {1, 0, 0}
  end
  -- an earlier attempt whose reply was lost did take it
  return {1, tonumber(redis.call('GET', KEYS[2])) or 0, 1}
end
if tonumber(ARGV[3]) > 0 then
  return {-1}
end
if current then
  return {0, redis.call('PTTL', KEYS[1]), 0}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, redis.call('INCR', KEYS[2]), 1}
