-- SPDX-License-Identifier: MIT
-- One name is one lock: follows queue.lua (and shared.lua) in the scripts
-- that take a lock. The kinds' keys all derive from the name's mutex key M
-- (P:{N}): the read-write lock is M:rw, the semaphore M:sem; the interop
-- key is the name N itself. A plain and a fair handle are the same mutex M.
--
-- A kind is taken only while no other kind of the name has a holder or a
-- live queued waiter. A request that waits queues in its kind's queue
-- behind another kind's holders too, unless another kind waits already (or
-- the interop key holds the name): so at most one kind of a name has live
-- waiters at a time, newcomers of the holding kind wait behind them (first
-- come, first served across two kinds), and two kinds never wait for each
-- other. A kind waiting behind another is told nothing when that kind lets
-- go: its waiters look again on a short, growing period (the core's poll
-- steps), and a heartbeat hands the name to them when it finds it free. A
-- hand-over after a release (or a cancel) needs no look at the other kinds:
-- none could be taken while the releasing kind held the name. One that may
-- find the name free without a release (an operator's unlock, a heartbeat
-- handing on a lapsed lock) looks first. (A foreign client on the interop key, redis-py's Lock, say, looks
-- at nothing but N: it excludes dlock's interop handles only.)
--
-- The scripts of the other kinds get N as an argument, not a key, and look
-- at it with pcall: a user whose ACL covers only the prefix's keys can take
-- locks, and then the interop key is not looked at (neither could that
-- user take it).

-- Which other kind of lock of the name holds it, or is waited for, now: nil
-- if none, else {code, ms left (-1: a key without expiry), may queue},
-- code as the core's dlock__held_as: 1 the mutex, 2 the interop key, 3 the
-- read-write lock, 4 the semaphore. The time left is the holder's lease, or
-- for a kind only waited for, its first waiter's place. may queue is 1 when
-- the caller may wait in its kind's queue (above). mine is the caller's
-- kind: 'x' mutex, 'i' interop key, 'r' read-write lock, 's' semaphore. N
-- may be nil (not known: not looked at).
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
  -- the kind holding the name is the one named; failing that, one waiting
  local held, queued
  local function note(code, left, is_queue)
    if left and is_queue then
      queued = queued or {code, left}
    elseif left then
      held = held or {code, left}
    end
  end
  if mine ~= 'x' then
    note(1, exclusive(M))
    note(1, waited(M), true)
  end
  if mine ~= 'i' and N then
    note(2, exclusive(N))
  end
  if mine ~= 'r' then
    local rw = M .. ':rw'
    note(3, exclusive(rw) or shared(rw))
    note(3, waited(rw), true)
  end
  if mine ~= 's' then
    local sem = M .. ':sem'
    note(4, shared(sem))
    note(4, waited(sem), true)
  end
  local found = held or queued
  if found then
    -- The caller may queue behind another kind's holders, its kind being
    -- the one that waits for the name, unless another kind waits already
    -- or the interop key holds it (whose holders never hand over).
    found[3] = (not queued and found[1] ~= 2) and 1 or 0
  end
  return found
end

-- Whether token, the caller's owner, holds the name as another kind than
-- mine (a handle made by dlock_lock_dup of one that holds it): waiting for
-- that kind would wait for itself.
local function holds_other_kind(M, N, mine, token)
  local function share(L)
    return redis.call('HEXISTS', L .. ':holders', token) == 1
  end
  return (mine ~= 'x' and redis.call('GET', M) == token) or
           (mine ~= 'i' and N ~= nil and redis.pcall('GET', N) == token) or
           (mine ~= 'r' and (redis.call('GET', M .. ':rw') == token or share(M .. ':rw'))) or
           (mine ~= 's' and share(M .. ':sem'))
end
