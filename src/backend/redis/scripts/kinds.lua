-- SPDX-License-Identifier: MIT
-- One name is one lock: follows queue.lua (and shared.lua) in the scripts
-- that take a lock. The kinds' keys all derive from the name's mutex key M
-- (P:{N}): the read-write lock is M:rw, the semaphore M:sem; the interop
-- key is the name N itself. A plain and a fair handle are the same mutex M.
--
-- A kind is taken, or queued for, only while no other kind of the name has
-- a holder or a live queued waiter. So at any moment at most one kind of a
-- name has holders or waiters, and a hand-over to the head of a kind's
-- queue (release, cancel, an operator's unlock) never needs to look at the
-- other kinds: none of them can have been taken while that queue had a live
-- waiter. (A foreign client on the interop key, redis-py's Lock, say, looks
-- at nothing but N: it excludes dlock's interop handles only.)
--
-- The scripts of the other kinds get N as an argument, not a key, and look
-- at it with pcall: a user whose ACL covers only the prefix's keys can take
-- locks, and then the interop key is not looked at (neither could that
-- user take it).

-- Which other kind of lock of the name holds it, or is waited for, now: nil
-- if none, else {code, ms left (-1: a key without expiry)}, code as the
-- core's dlock__held_as: 1 the mutex, 2 the interop key, 3 the read-write
-- lock, 4 the semaphore. The time left is the holder's lease, or for a kind
-- only waited for, its first waiter's place. mine is the caller's kind: 'x'
-- mutex, 'i' interop key, 'r' read-write lock, 's' semaphore.
local function other_kind(M, N, mine)
  -- N first: the probe without it is the prefix's keys only
  local probe = {mine ~= 'i' and N or nil}
  if mine ~= 'x' then
    probe[#probe + 1] = M
    probe[#probe + 1] = M .. ':queue'
  end
  if mine ~= 'r' then
    probe[#probe + 1] = M .. ':rw'
    probe[#probe + 1] = M .. ':rw:exp'
    probe[#probe + 1] = M .. ':rw:queue'
  end
  if mine ~= 's' then
    probe[#probe + 1] = M .. ':sem:exp'
    probe[#probe + 1] = M .. ':sem:queue'
  end
  local found = redis.pcall('EXISTS', unpack(probe))
  if type(found) ~= 'number' and probe[1] == N then
    -- N may not be looked at (an ACL): the rest is the prefix's
    N = nil
    table.remove(probe, 1)
    found = redis.call('EXISTS', unpack(probe))
  elseif type(found) ~= 'number' then
    found = redis.call('EXISTS', unpack(probe)) -- raises the error
  end
  -- the common case, nothing of another kind there: one call
  if found == 0 then
    return nil
  end
  local function exclusive(key)
    local ttl = redis.call('PTTL', key)
    if ttl ~= -2 then
      return ttl
    end
  end
  local function shared(L)
    local last = redis.call('ZRANGE', L .. ':exp', -1, -1, 'WITHSCORES')
    local left = last[2] and tonumber(last[2]) - now_ms()
    if left and left > 0 then
      return left
    end
  end
  local function waited(L)
    local w = live_head(L)
    return w and w[8]
  end
  local left
  if mine ~= 'x' then
    left = exclusive(M) or waited(M)
    if left then
      return {1, left}
    end
  end
  if mine ~= 'i' and N then
    left = exclusive(N)
    if left then
      return {2, left}
    end
  end
  if mine ~= 'r' then
    local rw = M .. ':rw'
    left = exclusive(rw) or shared(rw) or waited(rw)
    if left then
      return {3, left}
    end
  end
  if mine ~= 's' then
    local sem = M .. ':sem'
    left = shared(sem) or waited(sem)
    if left then
      return {4, left}
    end
  end
  return nil
end
