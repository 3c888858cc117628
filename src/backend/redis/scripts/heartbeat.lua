-- Keeps queued waiters' places: KEYS[i] the lock waiter i queues for,
-- ARGV[1] waiter lease ms, ARGV[i + 1] its owner token. Returns two
-- numbers per waiter:
--   1, 0      still queued (its place kept for another waiter lease)
--   2, fence  the lock was handed to it (it holds it, or a share of it)
--   0, 0      not queued any more (its place lapsed)
local wlease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local L, token = KEYS[i], ARGV[i + 1]
  if redis.call('PEXPIRE', L .. ':w:' .. token, wlease) == 1 then
    redis.call('PEXPIRE', L .. ':queue', 2 * wlease)
    out[2 * i - 1], out[2 * i] = 1, 0
  elseif redis.call('GET', L) == token or redis.call('HEXISTS', L .. ':holders', token) == 1 then
    out[2 * i - 1], out[2 * i] = 2, tonumber(redis.call('GET', L .. ':fence')) or 0
  else
    out[2 * i - 1], out[2 * i] = 0, 0
  end
end
return out
