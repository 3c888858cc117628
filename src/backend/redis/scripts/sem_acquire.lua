-- SPDX-License-Identifier: MIT
-- Semaphore: takes ARGV[6] of the ARGV[5] permits, or queues. KEYS[1]
-- the semaphore L (M:sem of the name's mutex M). ARGV[1..4] as acquire.lua
-- (two flags), ARGV[7] the name N (its interop key). A holder's permits go when its
-- lease runs out. Waiters are served in order.
-- Returns the fence, or {ttl_ms until the first lease could end, queued},
-- {holder_ttl_ms, queued, kind} when another kind of lock of the name holds it
-- (kinds.lua; -4 when this owner does: it would wait for itself), or
-- "permits N" if the semaphore, in use, has N permits, not
-- ARGV[5].
local L, token = KEYS[1], ARGV[1]
local cap, take = tonumber(ARGV[5]), tonumber(ARGV[6])
local again, join = string.sub(ARGV[3], 1, 1) == '1', string.sub(ARGV[3], 2, 2) == '1'
local now = now_ms()
prune(L, now, true)
-- What its users declare: all the same while anyone holds or waits; an
-- idle semaphore takes the new number.
local declared = tonumber(redis.call('GET', L .. ':cap'))
if declared and declared ~= cap and
    (permits_used(L) > 0 or live_head(L)) then
  return 'permits ' .. declared
end
redis.call('SET', L .. ':cap', cap)
local held = tonumber(redis.call('HGET', L .. ':holders', token))
if held and again then
  -- Handed to this wait while it was queued (its notice was missed): the
  -- caller's, with the lease it asked for (counted from this request).
  leave(L, token)
  redis.call('ZADD', L .. ':exp', 'XX', now + tonumber(ARGV[2]), token)
  return next_fence(counter_of(L))
elseif held then
  -- An earlier hold of this handle that it has given up or lost while the
  -- server still counts it: it goes, and this request takes its turn.
  redis.call('DECRBY', L .. ':used', held)
  redis.call('HDEL', L .. ':holders', token)
  redis.call('ZREM', L .. ':exp', token)
end
local other = other_kind(string.sub(L, 1, -5), ARGV[7], 's')
if other and holds_other_kind(string.sub(L, 1, -5), ARGV[7], 's', token) then
  return -4
end
if other then
  if join and other[3] == 1 then
    enqueue(L, token, ARGV[2], 's', take)
    return {other[2], 1, other[1]}
  end
  return {other[2], 0, other[1]}
end
local head = live_head(L)
if (not head or head[1] == token) and
    permits_used(L) + take <= cap then
  if again or head then
    leave(L, token)
  end
  hold_shared(L, token, take, now, tonumber(ARGV[2]), true)
  return next_fence(counter_of(L))
end
admit_sem(L, now)
local ttl = -1
local first = redis.call('ZRANGE', L .. ':exp', 0, 0, 'WITHSCORES')
if first[2] then
  ttl = tonumber(first[2]) - now
end
if not join then
  return {ttl, 0}
end
enqueue(L, token, ARGV[2], 's', take)
return {ttl, 1}
