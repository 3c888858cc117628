-- A waiter gives up: leaves the queue, and if the lock was handed to it
-- meanwhile, passes it on. KEYS as acquire.lua. ARGV[1] owner token.
-- Returns 1 if it passed the lock on, else 0.
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[1] .. ':w:' .. ARGV[1])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  handoff(KEYS[1] .. ':wake:')
  return 1
end
return 0
