-- Interop mode compare-and-expire. KEYS[1] lock key, ARGV[1] owner token,
-- ARGV[2] lease ms. Returns 1, or 0 if not the owner.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
