-- Interop mode batch renewal: KEYS[i] lock key, ARGV[1] lease ms,
-- ARGV[i + 1] owner token. Returns one 1 (renewed) or 0 per key.
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
