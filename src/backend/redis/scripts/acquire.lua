-- Takes the lock, or queues for it. (Attempts that will not queue use
-- MULTI/SET NX PX/INCR/PTTL/EXEC instead: see take_plain in redis.c.)
-- KEYS[1] the lock; its fence counter, queue and waiters' places are
-- KEYS[1]..':fence', ':queue' and ':w:<token>', in the same hash slot.
-- ARGV[1] owner token, ARGV[2] lease ms, ARGV[3] waiter lease ms,
-- ARGV[4] client id, ARGV[5] '1' if an earlier attempt of this wait queued.
-- Returns the fence (> 0) when the caller holds the lock now, else
-- {holder_ttl_ms, 1}: the caller is queued.
local lock, token = KEYS[1], ARGV[1]
local waiter = lock .. ':w:' .. token
local owner = redis.call('SET', lock, token, 'NX', 'PX', ARGV[2], 'GET')
if not owner or owner == token then
  if ARGV[5] == '1' then -- leave the place an earlier attempt took
    redis.call('LREM', lock .. ':queue', 0, token)
    redis.call('DEL', waiter)
  end
  if not owner then
    return redis.call('INCR', lock .. ':fence')
  end
  -- Handed to the caller while it was queued (its wake-up was missed), or
  -- an earlier attempt whose reply was lost did take it. The counter, read
  -- while the caller holds the lock, is a fence above every earlier
  -- holder's and below every later one's.
  return tonumber(redis.call('GET', lock .. ':fence')) or 0
end
local ttl = redis.call('PTTL', lock)
local wlease = tonumber(ARGV[3])
-- The waiter's place lives as long as its heartbeats. A place that lapsed
-- leaves its token in the queue: the hand-over skips it, or, if the waiter
-- came back meanwhile, serves it at its old position.
if not redis.call('SET', waiter, ARGV[2] .. ' ' .. ARGV[4], 'PX', wlease, 'GET') then
  redis.call('RPUSH', lock .. ':queue', token)
end
-- The queue outlives its last live waiter by one waiter lease at most.
redis.call('PEXPIRE', lock .. ':queue', 2 * wlease)
return {ttl, 1}
