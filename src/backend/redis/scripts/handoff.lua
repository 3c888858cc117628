-- Frees the lock KEYS[1] by handing it to the oldest queued waiter that is
-- still alive (its heartbeat deadline not passed), minting its fence and
-- waking it on its client's channel; with no such waiter, deletes the lock.
-- KEYS[2] fence counter, KEYS[3] queue, KEYS[4] waiters (absent in simple
-- mode). Returns the new owner's token or false.
local function handoff(channel_prefix)
  if #KEYS < 4 then
    redis.call('DEL', KEYS[1])
    return false
  end
  local now
  for _ = 1, 64 do
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not head then
      break
    end
    local entry = redis.call('HGET', KEYS[4], head)
    redis.call('ZREM', KEYS[3], head)
    redis.call('HDEL', KEYS[4], head)
    if entry then
      local deadline, lease, client = string.match(entry, '^(%d+) (%d+) (%x+)$')
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      if deadline and tonumber(deadline) >= now then
        redis.call('SET', KEYS[1], head, 'PX', lease)
        local fence = redis.call('INCR', KEYS[2])
        redis.call('PUBLISH', channel_prefix .. client, string.format('%s %d', head, fence))
        return head
      end
    end
  end
  redis.call('DEL', KEYS[1])
  return false
end
