-- Keeps queued waiters' places: for waiter i, KEYS[3i-2] lock, KEYS[3i-1]
-- fence counter, KEYS[3i] queue; ARGV[1] waiter lease ms, ARGV[i + 1] owner
-- token. Returns two numbers per waiter:
--   1, 0      still queued (its place kept for another waiter lease)
--   2, fence  the lock was handed to it
--   0, 0      not queued any more (its place lapsed)
local wlease = tonumber(ARGV[1])
local out = {}
for i = 1, #ARGV - 1 do
  local k, token = 3 * i - 2, ARGV[i + 1]
  if redis.call('PEXPIRE', KEYS[k] .. ':w:' .. token, wlease) == 1 then
    redis.call('PEXPIRE', KEYS[k + 2], 2 * wlease)
    out[2 * i - 1], out[2 * i] = 1, 0
  elseif redis.call('GET', KEYS[k]) == token then
    out[2 * i - 1], out[2 * i] = 2, tonumber(redis.call('GET', KEYS[k + 1])) or 0
  else
    out[2 * i - 1], out[2 * i] = 0, 0
  end
end
return out
