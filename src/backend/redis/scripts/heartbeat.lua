-- Keeps queued waiters' places: for waiter i, KEYS[4i-3] lock, KEYS[4i-2]
-- fence counter, KEYS[4i-1] queue, KEYS[4i] waiters; ARGV[1] waiter lease
-- ms, ARGV[i + 1] owner token. Returns two numbers per waiter:
--   1, 0      still queued (deadline pushed out)
--   2, fence  the lock was handed to it
--   0, 0      not queued any more (dropped, or the queue expired)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wlease = tonumber(ARGV[1])
local out = {}
for i = 1, #ARGV - 1 do
  local k, token = 4 * i - 3, ARGV[i + 1]
  local entry = redis.call('HGET', KEYS[k + 3], token)
  if entry then
    local lease, client = string.match(entry, '^%d+ (%d+) (%x+)$')
    redis.call('HSET', KEYS[k + 3], token, string.format('%d %s %s', now + wlease, lease, client))
    for j = k + 2, k + 3 do
      if redis.call('PTTL', KEYS[j]) < 2 * wlease then
        redis.call('PEXPIRE', KEYS[j], 2 * wlease)
      end
    end
    out[2 * i - 1], out[2 * i] = 1, 0
  elseif redis.call('GET', KEYS[k]) == token then
    out[2 * i - 1], out[2 * i] = 2, tonumber(redis.call('GET', KEYS[k + 1])) or 0
  else
    out[2 * i - 1], out[2 * i] = 0, 0
  end
end
return out
