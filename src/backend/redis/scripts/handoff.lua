-- Frees the lock KEYS[1] by handing it to the oldest queued waiter that is
-- still alive (its key <lock>:w:<token> has not expired), minting its fence
-- and waking it on its client's channel; with no such waiter, deletes the
-- lock. Returns the new owner's token or false.
local function handoff()
  local lock = KEYS[1]
  for _ = 1, 64 do
    local head = redis.call('LPOP', lock .. ':queue')
    if not head then
      break
    end
    local waiter = lock .. ':w:' .. head
    local entry = redis.call('GET', waiter)
    if entry then
      redis.call('DEL', waiter)
      local lease, client = string.match(entry, '^(%d+) (%x+)$')
      redis.call('SET', lock, head, 'PX', lease)
      local fence = redis.call('INCR', lock .. ':fence')
      redis.call('PUBLISH', lock .. ':wake:' .. client, head .. ' ' .. fence)
      return head
    end
  end
  redis.call('DEL', lock)
  return false
end
