-- Takes the lock, re-enters it, or queues for it.
-- KEYS[1] lock hash, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] waiters
-- ARGV[1] owner token, ARGV[2] lease ms, ARGV[3] holds the caller has,
-- ARGV[4] '1' to queue when held, ARGV[5] waiter lease ms, ARGV[6] client id
-- Returns {1, fence, holds}    the caller holds the lock,
--         {0, holder_ttl, q}   someone else does (q = 1 if the caller is queued),
--         {-1}                 the caller had held it and does not any more.
local token, lease, holds = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local owner = redis.call('HGET', KEYS[1], 'o')
if owner == token then
  if holds > 0 then
    local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
    if redis.call('PTTL', KEYS[1]) < lease then
      redis.call('PEXPIRE', KEYS[1], lease)
    end
    return {1, tonumber(redis.call('HGET', KEYS[1], 'f')), n}
  end
  -- Handed to the caller while it was queued (its wake-up was missed), or
  -- an earlier attempt whose reply was lost did take it.
  local f = redis.call('HMGET', KEYS[1], 'f', 'n')
  redis.call('ZREM', KEYS[3], token)
  redis.call('HDEL', KEYS[4], token)
  return {1, tonumber(f[1]), tonumber(f[2])}
end
if holds > 0 then
  return {-1}
end
if not owner then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'o', token, 'n', 1, 'f', fence)
  redis.call('PEXPIRE', KEYS[1], lease)
  if ARGV[4] == '1' then
    redis.call('ZREM', KEYS[3], token)
    redis.call('HDEL', KEYS[4], token)
  end
  return {1, fence, 1}
end
local ttl = redis.call('PTTL', KEYS[1])
if ARGV[4] ~= '1' then
  return {0, ttl, 0}
end
local t = redis.call('TIME')
local wlease = tonumber(ARGV[5])
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[3], 'NX', tonumber(t[1]) * 1000000 + tonumber(t[2]), token)
redis.call('HSET', KEYS[4], token, string.format('%d %d %s', now + wlease, lease, ARGV[6]))
-- The queue outlives its last live waiter by one waiter lease at most.
for i = 3, 4 do
  if redis.call('PTTL', KEYS[i]) < 2 * wlease then
    redis.call('PEXPIRE', KEYS[i], 2 * wlease)
  end
end
return {0, ttl, 1}
