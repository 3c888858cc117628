-- Seeds the fence counter KEYS[2] of lock KEYS[1] after the uncontended
-- path (MULTI/SET NX/INCR/EXEC, which cannot branch) found it missing or
-- never seeded. ARGV[1] the owner token of an attempt that took the lock,
-- or '' if it did not. Returns a fresh fence if the token holds the lock,
-- else 0.
local fence = next_fence(KEYS[2])
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) == ARGV[1] then
  return fence
end
return 0
