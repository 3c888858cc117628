-- Mutex: releases the lock KEYS[1] and hands it to the next waiter.
-- ARGV[1] owner token, ARGV[2] mode: '' normal, 'f' force (operator:
-- whoever holds it), 's' simple (interop key: no queue).
-- Returns 0 released, -1 held by another owner, -2 not held.
local owner = redis.call('GET', KEYS[1])
if ARGV[2] ~= 'f' then
  if not owner then
    return -2
  end
  if owner ~= ARGV[1] then
    return -1
  end
end
if ARGV[2] == 's' then
  redis.call('DEL', KEYS[1])
else
  admit_exclusive(KEYS[1])
end
return 0
