-- Sets the lease of a lock the token holds. KEYS[1] lock hash.
-- ARGV[1] owner token, ARGV[2] lease ms. Returns 1, or 0 if not the owner.
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
