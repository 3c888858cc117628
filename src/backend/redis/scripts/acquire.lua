-- SPDX-License-Identifier: MIT
-- Mutex: takes the lock, or queues for it. KEYS[1] the lock L (the name's
-- mutex M); for an interop key (flag 'i') KEYS[1] is the name N and
-- KEYS[2] the fence counter M:fence of the name's mutex M. ARGV[1] owner
-- token, ARGV[2] lease ms, ARGV[3] three flags: '1' if an earlier attempt
-- of this wait queued, else '0'; '1' to queue, else '0'; '1' for a fair
-- lock (no overtaking waiters), 'i' for an interop key (never queued), else
-- '0'. ARGV[4] the waiter (queue.lua's enqueue; empty when not queueing),
-- ARGV[5] the name N (not for an interop key).
-- Returns the fence (> 0) when the caller holds the lock now, else
-- {holder_ttl_ms, 1 if the caller is queued}, or {holder_ttl_ms, queued,
-- kind} when another kind of lock of the name holds it (kinds.lua), or -4
-- when that other kind is held by this owner.
local L, token = KEYS[1], ARGV[1]

-- The common case first, before the shared functions are defined (defining
-- them costs the server more than this path): a plain mutex, nothing of
-- another kind of the name there (kinds.lua's probe, keys as literals),
-- free. The fence as queue.lua's next_fence makes it. Anything else (held,
-- another kind there, an interop key the ACL hides, L of another type) goes
-- the whole way below, which finds the same and more.
if (ARGV[3] == '000' or ARGV[3] == '010') and
    redis.pcall('EXISTS', ARGV[5], L .. ':rw', L .. ':rw:exp', L .. ':rw:queue', L .. ':sem:exp',
                L .. ':sem:queue') == 0 and
    redis.pcall('SET', L, token, 'NX', 'PX', ARGV[2], 'GET') == false then
  local F, t = L .. ':fence', redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  local fence = redis.call('INCR', F)
  if fence < now then
    redis.call('INCRBY', F, now - fence)
    return now
  end
  return fence
end
-- @prelude
local again, join = string.sub(ARGV[3], 1, 1) == '1', string.sub(ARGV[3], 2, 2) == '1'
local mode = string.sub(ARGV[3], 3, 3)
local interop = mode == 'i'
local M = interop and string.sub(KEYS[2], 1, -7) or L
local N = interop and L or ARGV[5]
local F = interop and KEYS[2] or (L .. ':fence')

-- The lock is the caller's already: handed to it while it was queued (its
-- notice was missed, or is on its way), taken by an earlier attempt whose
-- reply was lost, or an earlier hold of this owner still on the server. It
-- is the caller's with the lease it asked for (the client counts it from
-- this request). The counter, read while the caller holds the lock, is a
-- fence above every earlier holder's and below every later one's.
local function already_mine()
  if not interop then
    leave(L, token)
  end
  redis.call('PEXPIRE', L, ARGV[2])
  return next_fence(F)
end

local other = other_kind(M, N, interop and 'i' or 'x')
if other then
  if redis.call('GET', L) == token then
    return already_mine()
  end
  if holds_other_kind(M, N, interop and 'i' or 'x', token) then
    return -4
  end
  if join and other[3] == 1 then
    enqueue(L, token, ARGV[2], 'x', 1)
    return {other[2], 1, other[1]}
  end
  return {other[2], 0, other[1]}
end
local head
if mode == '1' then
  -- Looked at before the queue: a fair waiter handed the lock while this
  -- request was on its way is no longer at the head, and must not queue
  -- again behind the others (it would hold the lock and wait for it).
  if redis.call('GET', L) == token then
    return already_mine()
  end
  head = live_head(L)
  if head and head[1] ~= token and redis.call('EXISTS', L) == 0 then
    -- Free, with someone waiting (its holder's lease ran out): it is theirs.
    admit_exclusive(L)
  end
end
if not head or head[1] == token then
  local owner = redis.call('SET', L, token, 'NX', 'PX', ARGV[2], 'GET')
  if owner == token then
    return already_mine()
  end
  if not owner then
    if again or head then
      leave(L, token)
    end
    return next_fence(F)
  end
end
local ttl = redis.call('PTTL', L)
if not join then
  return {ttl, 0}
end
enqueue(L, token, ARGV[2], 'x', 1)
return {ttl, 1}
