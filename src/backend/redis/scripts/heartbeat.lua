-- Keeps queued waiters' places: for waiter i, KEYS[3i-2] lock hash,
-- KEYS[3i-1] queue, KEYS[3i] waiters; ARGV[1] waiter lease ms,
-- ARGV[i + 1] owner token. Returns two numbers per waiter:
--   1, 0      still queued (deadline pushed out)
--   2, fence  the lock was handed to it
--   0, 0      not queued any more (dropped, or the queue expired)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wlease = tonumber(ARGV[1])
local out = {}
for i = 1, #ARGV - 1 do
  local lock, queue, waiters, token = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i], ARGV[i + 1]
  local entry = redis.call('HGET', waiters, token)
  if entry then
    local lease, client = string.match(entry, '^%d+ (%d+) (%x+)$')
    redis.call('HSET', waiters, token, string.format('%d %s %s', now + wlease, lease, client))
    for _, k in ipairs({queue, waiters}) do
      if redis.call('PTTL', k) < 2 * wlease then
        redis.call('PEXPIRE', k, 2 * wlease)
      end
    end
    out[2 * i - 1], out[2 * i] = 1, 0
  elseif redis.call('HGET', lock, 'o') == token then
    out[2 * i - 1], out[2 * i] = 2, tonumber(redis.call('HGET', lock, 'f'))
  else
    out[2 * i - 1], out[2 * i] = 0, 0
  end
end
return out
