-- Keeps queued waiters' places: KEYS[i] the lock waiter i queues for,
-- ARGV[1] waiter lease ms, ARGV[i + 1] its owner token. Returns two numbers
-- per waiter:
--   1, 0      still queued (its place kept for another waiter lease)
--   2, fence  the lock was handed to it
--   0, 0      not queued any more (its place lapsed)
local wlease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local lock, token = KEYS[i], ARGV[i + 1]
  if redis.call('PEXPIRE', lock .. ':w:' .. token, wlease) == 1 then
    redis.call('PEXPIRE', lock .. ':queue', 2 * wlease)
    out[2 * i - 1], out[2 * i] = 1, 0
  elseif redis.call('GET', lock) == token then
    out[2 * i - 1], out[2 * i] = 2, tonumber(redis.call('GET', lock .. ':fence')) or 0
  else
    out[2 * i - 1], out[2 * i] = 0, 0
  end
end
return out
