-- A waiter gives up: leaves the queue of the lock KEYS[1], and if the lock
-- was handed to it meanwhile, passes it on. ARGV[1] owner token.
-- Returns 1 if it passed the lock on, else 0.
redis.call('LREM', KEYS[1] .. ':queue', 0, ARGV[1])
redis.call('DEL', KEYS[1] .. ':w:' .. ARGV[1])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  handoff()
  return 1
end
return 0
