-- Frees the lock KEYS[1] by handing it to the oldest queued waiter that is
-- still alive (its key P:{N}:w:<token> has not expired), minting its fence
-- and waking it on its client's channel; with no such waiter, deletes the
-- lock. KEYS[2] fence counter, KEYS[3] queue (absent in simple mode).
-- Returns the new owner's token or false.
local function handoff(channel_prefix)
  if #KEYS >= 3 then
    for _ = 1, 64 do
      local head = redis.call('ZPOPMIN', KEYS[3])[1]
      if not head then
        break
      end
      local waiter = KEYS[1] .. ':w:' .. head
      local entry = redis.call('GET', waiter)
      if entry then
        redis.call('DEL', waiter)
        local lease, client = string.match(entry, '^(%d+) (%x+)$')
        redis.call('SET', KEYS[1], head, 'PX', lease)
        local fence = redis.call('INCR', KEYS[2])
        redis.call('PUBLISH', channel_prefix .. client, head .. ' ' .. fence)
        return head
      end
    end
  end
  redis.call('DEL', KEYS[1])
  return false
end
