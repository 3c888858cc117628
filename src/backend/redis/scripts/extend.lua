-- Sets the lease of a lock the token holds. KEYS[1] lock. ARGV[1] owner
-- token, ARGV[2] lease ms, ARGV[3] '1' to only lengthen it (re-entry).
-- Returns 1, or 0 if the token does not hold it.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[3] ~= '1' or redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
