-- SPDX-License-Identifier: MIT
-- Mutex: takes the lock, or queues for it. KEYS[1] the lock L, KEYS[2] (an
-- interop key's) fence counter, else L:fence. ARGV[1] owner token, ARGV[2] lease ms, ARGV[3] waiter
-- lease ms, ARGV[4] client id, ARGV[5] '1' if an earlier attempt of this
-- wait queued, ARGV[6] wait id, ARGV[7] notify ('s' stream, else the pub/sub channel),
-- ARGV[8] '1' to queue, ARGV[9] '1' for a fair lock (no overtaking waiters).
-- Returns the fence (> 0) when the caller holds the lock now, else
-- {holder_ttl_ms, 1 if the caller is queued}.
local L, token = KEYS[1], ARGV[1]
local F = KEYS[2] or (L .. ':fence') -- an interop key's counter is apart
local head
if ARGV[9] == '1' then
  head = live_head(L)
  if head and head[1] ~= token and redis.call('EXISTS', L) == 0 then
    -- Free, with someone waiting (its holder's lease ran out): it is theirs.
    admit_exclusive(L)
  end
end
if not head or head[1] == token then
  local owner = redis.call('SET', L, token, 'NX', 'PX', ARGV[2], 'GET')
  if not owner or owner == token then
    if ARGV[5] == '1' or head then
      leave(L, token)
    end
    if not owner then
      return next_fence(F)
    end
    -- Handed to the caller while it was queued (its notice was missed), or
    -- an earlier attempt whose reply was lost took it, or an earlier hold
    -- of this owner is still on the server. It is the caller's now, with
    -- the lease it asked for (the client counts it from this request). The
    -- counter, read while the caller holds the lock, is a fence above every
    -- earlier holder's and below every later one's.
    redis.call('PEXPIRE', L, ARGV[2])
    return next_fence(F)
  end
end
local ttl = redis.call('PTTL', L)
if ARGV[8] ~= '1' then
  return {ttl, 0}
end
enqueue(L, token, ARGV[2], 'x', 1)
return {ttl, 1}
