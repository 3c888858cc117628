-- Renews a batch of held locks: KEYS[i] lock, ARGV[1] lease ms,
-- ARGV[i + 1] owner token. Only a lock still held by its token is renewed:
-- a lapsed lock is never taken back. Returns one 1 (renewed) or 0 per key.
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
