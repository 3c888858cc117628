-- SPDX-License-Identifier: MIT
-- Several mutexes whose keys share one hash slot, all or nothing: KEYS
-- the locks, ARGV[1] owner token, ARGV[2] lease ms. Takes every one if
-- every one is free (or already the caller's after a lost reply).
-- Returns the fences in KEYS order, or {-1, i, ttl}: KEYS[i] is held by
-- someone else for ttl ms more; nothing was taken.
for i = 1, #KEYS do
  local owner = redis.call('GET', KEYS[i])
  if owner and owner ~= ARGV[1] then
    return {-1, i, redis.call('PTTL', KEYS[i])}
  end
end
local fences = {}
for i = 1, #KEYS do
  if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2]) -- already the caller's
  end
  fences[i] = next_fence(KEYS[i] .. ':fence')
end
return fences
