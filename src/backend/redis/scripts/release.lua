-- Releases the lock and hands it to the next waiter.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue (simple mode: KEYS[1]
-- only). ARGV[1] owner token, ARGV[2] '1' to force (operator: whoever
-- holds it). Returns 0 released, -1 held by another owner, -2 not held.
local owner = redis.call('GET', KEYS[1])
if ARGV[2] ~= '1' then
  if not owner then
    return -2
  end
  if owner ~= ARGV[1] then
    return -1
  end
end
handoff(KEYS[1] .. ':wake:')
return 0
