-- Takes the lock, or queues for it. (Attempts that will not queue use
-- MULTI/SET NX PX/INCR/PTTL/EXEC instead: see take_plain in redis.c.)
-- KEYS[1] lock, KEYS[2] fence counter, [KEYS[3] queue, KEYS[4] waiters]
-- ARGV[1] owner token, ARGV[2] lease ms,
-- [ARGV[3] waiter lease ms, ARGV[4] client id, ARGV[5] '1' if an earlier
--  attempt queued: given to queue when held]
-- Returns the fence (> 0) when the caller holds the lock now, else
-- {holder_ttl_ms, 1 if the caller is queued else 0}.
local token, queue = ARGV[1], ARGV[3] ~= nil
if redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2]) then
  if ARGV[5] == '1' then
    redis.call('ZREM', KEYS[3], token)
    redis.call('HDEL', KEYS[4], token)
  end
  return redis.call('INCR', KEYS[2])
end
if redis.call('GET', KEYS[1]) == token then
  -- Handed to the caller while it was queued (its wake-up was missed), or
  -- an earlier attempt whose reply was lost did take it. The counter, read
  -- while the caller holds the lock, is a fence above every earlier
  -- holder's and below every later one's.
  if queue then
    redis.call('ZREM', KEYS[3], token)
    redis.call('HDEL', KEYS[4], token)
  end
  return tonumber(redis.call('GET', KEYS[2])) or 0
end
local ttl = redis.call('PTTL', KEYS[1])
if not queue then
  return {ttl, 0}
end
local t = redis.call('TIME')
local wlease = tonumber(ARGV[3])
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[3], 'NX', tonumber(t[1]) * 1000000 + tonumber(t[2]), token)
redis.call('HSET', KEYS[4], token, string.format('%d %d %s', now + wlease, ARGV[2], ARGV[4]))
-- The queue outlives its last live waiter by one waiter lease at most.
for i = 3, 4 do
  if redis.call('PTTL', KEYS[i]) < 2 * wlease then
    redis.call('PEXPIRE', KEYS[i], 2 * wlease)
  end
end
return {ttl, 1}
