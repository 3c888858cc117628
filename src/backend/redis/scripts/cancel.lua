-- A waiter gives up: leaves the queue, and if the lock was handed to it
-- meanwhile, passes it on. KEYS as acquire.lua. ARGV[1] owner token,
-- ARGV[2] channel prefix. Returns 1 if it passed the lock on, else 0.
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  handoff(ARGV[2])
  return 1
end
return 0
