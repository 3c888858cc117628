-- Takes the lock, or queues for it (attempts that will not queue use
-- MULTI/SET NX PX/INCR/PTTL/EXEC instead: see take_plain in redis.c).
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue.
-- ARGV[1] owner token, ARGV[2] lease ms, ARGV[3] waiter lease ms,
-- ARGV[4] client id, ARGV[5] '1' if an earlier attempt of this wait queued.
-- Returns the fence (> 0) when the caller holds the lock now, else
-- {holder_ttl_ms, 1}: the caller is queued.
local token = ARGV[1]
local waiter = KEYS[1] .. ':w:' .. token
local owner = redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2], 'GET')
if not owner or owner == token then
  if ARGV[5] == '1' then
    redis.call('ZREM', KEYS[3], token)
    redis.call('DEL', waiter)
  end
  if not owner then
    return redis.call('INCR', KEYS[2])
  end
  -- Handed to the caller while it was queued (its wake-up was missed), or
  -- an earlier attempt whose reply was lost did take it. The counter, read
  -- while the caller holds the lock, is a fence above every earlier
  -- holder's and below every later one's.
  return tonumber(redis.call('GET', KEYS[2])) or 0
end
local ttl = redis.call('PTTL', KEYS[1])
local t = redis.call('TIME')
local wlease = tonumber(ARGV[3])
redis.call('ZADD', KEYS[3], 'NX', tonumber(t[1]) * 1000000 + tonumber(t[2]), token)
-- The waiter's place lives as long as its heartbeats; the queue outlives
-- its last live waiter by one waiter lease at most.
redis.call('SET', waiter, ARGV[2] .. ' ' .. ARGV[4], 'PX', wlease)
redis.call('PEXPIRE', KEYS[3], 2 * wlease)
return {ttl, 1}
