-- SPDX-License-Identifier: MIT
-- Read-write lock: takes it to read (third flag 'r') or to write ('w'), or
-- queues. KEYS[1] the lock L (M:rw of the name's mutex M). ARGV[1..4] as
-- acquire.lua, ARGV[5] the name N (its interop key).
-- Policy: first come, first served. Readers at the head of the queue are
-- admitted together; a reader that comes after a queued writer waits for
-- it, so a stream of readers cannot starve writers (not even readers whose
-- token already holds a read share: re-entry is counted in the handle),
-- except a reader whose share was handed to this very wait (it asks again,
-- and its place is gone): that share is its own. The owner of the write
-- lock is admitted to read at once: a downgrade.
-- Returns the fence, {holder_ttl_ms, queued}, {holder_ttl_ms, queued, 0, 1}
-- when only a waiting writer keeps a reader out, {holder_ttl_ms, queued, kind}
-- when another kind of lock of the name holds it (kinds.lua; -4 when this
-- owner does: it would wait for itself), -3 when a
-- reader asks to write (an upgrade, which could deadlock: two readers each
-- waiting for the other to leave), or -5 when the owner waits for it as the
-- other kind already (a handle's dlock_lock_dup: one token has one place in
-- the queue, and a read share handed to it would be taken by the write wait
-- too).
local L, token, mode = KEYS[1], ARGV[1], string.sub(ARGV[3], 3, 3)
local again, join = string.sub(ARGV[3], 1, 1) == '1', string.sub(ARGV[3], 2, 2) == '1'
local now = now_ms()
prune(L, now, false)
local reader = redis.call('HEXISTS', L .. ':holders', token) == 1
if mode == 'w' and reader then
  return -3
end
local placed = redis.call('GET', L .. ':w:' .. token)
if placed and string.match(placed, '^%d+ %x+ (%a) ') ~= mode then
  return -5
end
local writer = redis.call('GET', L)
local head = live_head(L)
local first = not head or head[1] == token
local ok
if mode == 'w' and writer == token then
  -- Handed to the caller while it was queued (its notice was missed), or
  -- an earlier hold of this owner still on the server: the caller's, with
  -- the lease it asked for.
  if again or head then
    leave(L, token)
  end
  redis.call('PEXPIRE', L, ARGV[2])
  return next_fence(counter_of(L))
end
if mode == 'r' and reader and again and redis.call('EXISTS', L .. ':w:' .. token) == 0 then
  -- Handed a read share while this wait was queued (its notice was missed:
  -- a waiter behind another kind looks again on its polling steps, each
  -- under a fresh wait id, and a notice for the step before is ignored):
  -- the hand-over took its place, and the share is the caller's, with the
  -- lease it asked for. Queueing again would wait behind a writer that
  -- waits for this very share, until the share's lease ran out.
  leave(L, token)
  redis.call('ZADD', L .. ':exp', 'XX', now + tonumber(ARGV[2]), token)
  return next_fence(counter_of(L))
end
local other = other_kind(string.sub(L, 1, -4), ARGV[5], 'r')
if other and holds_other_kind(string.sub(L, 1, -4), ARGV[5], 'r', token) then
  return -4
end
if other then
  if join and other[3] == 1 then
    enqueue(L, token, ARGV[2], mode, 1)
    return {other[2], 1, other[1]}
  end
  return {other[2], 0, other[1]}
end
if mode == 'r' then
  -- a writer taking the read lock too (a downgrade); otherwise first come,
  -- first served: a reader never passes a waiting writer
  ok = writer == token or (not writer and first)
else
  ok = not writer and first and redis.call('HLEN', L .. ':holders') == 0
end
if ok then
  if again or head then
    leave(L, token)
  end
  if mode == 'r' then
    hold_shared(L, token, 1, now, tonumber(ARGV[2]), false)
  else
    redis.call('SET', L, token, 'PX', ARGV[2])
  end
  return next_fence(counter_of(L))
end
admit_rw(L, now) -- the lock may be free for those ahead (a holder's lease ran out)
local ttl = -1
if writer then
  ttl = redis.call('PTTL', L)
else
  local last = redis.call('ZRANGE', L .. ':exp', -1, -1, 'WITHSCORES')
  if last[2] then
    ttl = tonumber(last[2]) - now
  end
end
-- A reader kept out only by a writer that waits first, while readers hold
-- it, is told so (a fourth element, 1): "held" reads as if it could share.
local reply = {ttl, 0}
if mode == 'r' and head and head[1] ~= token and head[4] == 'w' and
    redis.call('EXISTS', L) == 0 and redis.call('HLEN', L .. ':holders') > 0 then
  reply = {ttl, 0, 0, 1}
end
if join then
  enqueue(L, token, ARGV[2], mode, 1)
  reply[2] = 1
end
return reply
