-- SPDX-License-Identifier: MIT
-- Several mutexes whose keys share one hash slot, all or nothing: KEYS the
-- locks (each its name's mutex M), ARGV[1] owner token, ARGV[2] lease ms,
-- ARGV[2 + i] the name (interop key) of KEYS[i]. Takes every one if every one
-- is free (or already the caller's after a lost reply) and no other kind of
-- lock of its name holds it or is waited for (kinds.lua).
-- Returns the fences in KEYS order, or {-1, i, ttl}: KEYS[i] is held by
-- someone else (or as another kind) for ttl ms more; nothing was taken.
local n = #KEYS
for i = 1, n do
  local owner = redis.call('GET', KEYS[i])
  if owner and owner ~= ARGV[1] then
    return {-1, i, redis.call('PTTL', KEYS[i])}
  end
  local other = not owner and other_kind(KEYS[i], ARGV[2 + i], 'x')
  if other then
    return {-1, i, other[2]}
  end
end
local fences = {}
for i = 1, n do
  if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2]) -- already the caller's
  end
  fences[i] = next_fence(KEYS[i] .. ':fence')
end
return fences
