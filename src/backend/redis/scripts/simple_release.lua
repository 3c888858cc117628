-- Interop mode compare-and-delete. KEYS[1] lock key, ARGV[1] owner token,
-- ARGV[2] '1' to force. Returns 0 released, -1 held by another owner, -2 not held.
local current = redis.call('GET', KEYS[1])
if not current then
  return -2
end
if current ~= ARGV[1] and ARGV[2] ~= '1' then
  return -1
end
redis.call('DEL', KEYS[1])
return 0
