-- SPDX-License-Identifier: MIT
-- The queue: shared by the scripts that queue waiters and grant locks
-- (shared.lua adds what readers and semaphores need). A lock's keys all
-- derive from its base key L (KEYS[1]), in one hash slot:
--   L                 the exclusive holder's owner token (mutex, writer), PX = lease
--   M:fence           the name's fence counter (M its mutex key, for every
--                     kind of the name), moved on by every new holder
--   L:queue           waiters' tokens in arrival order (list)
--   L:w:<token>       a waiter's place, PX = waiter lease, kept by heartbeats:
--                     "lease client kind count waitid notify", notify: 's' for
--                     a stream, 'c' sharded pub/sub (a Redis Cluster's), 'p'
--                     none, else the pub/sub channel to publish to
--   L:holders         shared holders: token -> holds (readers) or permits (semaphore)
--   L:exp             shared holders' lease ends (zset, server ms)
--   L:used, L:cap     semaphore: permits taken (kept for dlock 0.1, which reads
--                     it; this release sums L:holders), and declared
--   L:g:<token>       the fence of the last hand-over to token, PX = its lease:
--                     a hold its client has under a lower fence is not the
--                     one this grant made (renew.lua, release.lua)
--   L:wake:<client>   hand-over notices for one client (notify=stream)
--   P:wake:<client>   the same (notify=pubsub): a channel, not a key
--   M:wake:<client>   the same on a Redis Cluster: a shard channel of the
--                     lock's slot (M the name's mutex key), SPUBLISHed

-- Fences: the counter F, but never below the server's clock in
-- microseconds: each new fence is max(F + 1, now). So a fence exceeds every
-- fence handed out before for the name even when the store lost or went
-- back on its counter (a restart without persistence or from an old
-- snapshot, FLUSHALL, eviction), as long as the server's clock does not go
-- back and a name gets fewer than one new holder per microsecond on
-- average. Any value of F read while a holder holds the lock is also a valid
-- fence for it, but a fresh one costs the same and survives a loss: grants
-- always take a fresh one.
-- (Lua's numbers hold microseconds since 1970 exactly, up to 2^53. Raising
-- the counter by the difference is cheaper for the server than writing the
-- clock's sixteen digits, and than formatting them.)
local function next_fence(F)
  local t = redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  local fence = redis.call('INCR', F)
  if fence < now then
    redis.call('INCRBY', F, now - fence)
    return now
  end
  return fence
end

-- The name's fence counter, M:fence of its mutex key M, for every kind of
-- lock of the name: one name is one lock, and its fences one sequence.
-- (Keys end in the name's tag, '}', and then the kind: ':rw', ':sem'.)
local function counter_of(L)
  return (string.match(L, '^(.*}):rw$') or string.match(L, '^(.*}):sem$') or L) .. ':fence'
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The first waiter whose place is still alive, dropping dead ones before
-- it: {token, lease, client, kind, count, waitid, notify, place_ms}, or nil
-- (place_ms: what is left of its place's waiter lease). `first`, if given,
-- is the queue's head as the caller just read it.
local function live_head(L, first)
  local head = first
  for _ = 1, 64 do
    head = head or redis.call('LINDEX', L .. ':queue', 0)
    if not head then
      return nil
    end
    local entry = redis.call('GET', L .. ':w:' .. head)
    if entry then
      local lease, client, kind, count, waitid, notify =
        string.match(entry, '^(%d+) (%x+) (%a) (%d+) (%d+) (%S+)$')
      if lease then
        local place_ms = redis.call('PTTL', L .. ':w:' .. head)
        return {head, lease, client, kind, tonumber(count), waitid, notify, place_ms}
      end
    end
    redis.call('LPOP', L .. ':queue')
    head = nil
  end
  return nil
end

-- The lease a hand-over to w carries: the one it asked for, but no longer
-- than what is left of its place. A waiter that died is handed the lock
-- for at most the rest of its waiter lease, not a whole lease; a live one
-- renews it to its whole lease (its client counts the grant's validity from
-- its last request the store answered "queued", attempt or heartbeat,
-- which set the place's expiry).
local function grant_lease(w)
  local lease = tonumber(w[2])
  if w[8] > 0 and w[8] < lease then
    return w[8]
  end
  return lease
end

-- Takes the head waiter w off the queue and tells its client that w now
-- holds the lock with this fence. The fence is noted beside the hold
-- (L:g:<token>, for as long as the grant's lease): a store that came back
-- with an older state (a failover to a replica that missed the last writes)
-- may keep a place whose wait was served already, and grant it again; the
-- client, holding under the first grant's lower fence, then learns at its
-- next renewal or release that this hold is not the one it was given
-- (renew.lua, release.lua: a noted fence above the client's). It lives a
-- second longer than the hold it notes, which ends with the grant's lease
-- unless that client renews it (after this check). Not noted (`note`
-- false) when the token held a share already: another handle of its owner
-- (dlock_lock_dup) holds under an older fence, and a share its owner still
-- has keeps out a writer, so no other holder came between. (pcall: on a
-- Redis Cluster slot being migrated, a key that does not exist is refused;
-- the hand-over goes on unnoted, its check then passes.)
local function grant(L, w, fence, note)
  redis.call('LPOP', L .. ':queue')
  redis.call('DEL', L .. ':w:' .. w[1])
  -- (%d: Lua's own number-to-string keeps only 14 digits)
  local f = string.format('%d', fence)
  if note then
    redis.pcall('SET', L .. ':g:' .. w[1], f, 'PX', grant_lease(w) + 1000)
  end
  local notice = w[1] .. ' ' .. w[6] .. ' ' .. f
  if w[7] == 's' then
    local stream = L .. ':wake:' .. w[3]
    redis.call('XADD', stream, 'MAXLEN', '~', 64, '*', 'm', notice)
    redis.call('PEXPIRE', stream, 3600000)
  elseif w[7] == 'c' then
    -- a Redis Cluster: a shard channel of the lock's slot, served by this
    -- node alone (a plain PUBLISH reaches every node of the cluster), and
    -- of the waiter's client alone: M:wake:<client>, M the name's mutex
    -- key (counter_of's). Not among KEYS: Redis 7 checks a script's
    -- commands against the slots the node serves, as it does the lock's
    -- derived keys, and an argument more would cost every call. (Inline:
    -- one more function would be defined by every script that includes
    -- this file, at every call.)
    local M = string.match(L, '^(.*}):rw$') or string.match(L, '^(.*}):sem$') or L
    redis.call('SPUBLISH', M .. ':wake:' .. w[3], notice)
  elseif w[7] ~= 'p' then
    redis.call('PUBLISH', w[7], notice)
  end
  -- 'p': no notice, the waiter polls (a Redis Cluster's client of dlock
  -- before sharded notices: it looks whether the lock was handed to it)
end

-- Queues token unless it is queued already; its place lives a waiter lease.
-- ARGV[4] the waiter: "WAITER_LEASE CLIENT WAIT_ID NOTIFY" (notify: 's'
-- stream, 'c' sharded pub/sub, 'p' none (it polls), else the pub/sub
-- channel).
local function enqueue(L, token, lease, kind, count)
  local wlease, client, rest = string.match(ARGV[4], '^(%d+) (%S+) (.*)$')
  local place = table.concat({lease, client, kind, count, rest}, ' ')
  if not redis.call('SET', L .. ':w:' .. token, place, 'PX', wlease, 'GET') then
    redis.call('RPUSH', L .. ':queue', token)
  end
  redis.call('PEXPIRE', L .. ':queue', 2 * tonumber(wlease))
end

-- Leaves the place an earlier attempt took.
local function leave(L, token)
  redis.call('LREM', L .. ':queue', 0, token)
  redis.call('DEL', L .. ':w:' .. token)
end

-- Mutex: with the lock free, hands it to the first live waiter (`first`:
-- the queue's head, if the caller just read it).
local function admit_exclusive(L, first)
  local w = live_head(L, first)
  if w then
    -- the fence first: on a Redis Cluster slot being migrated, a command on
    -- a key that has left fails the script where it stands, and a holder
    -- set without its fence would hold under the last holder's
    local fence = next_fence(counter_of(L))
    redis.call('SET', L, w[1], 'PX', grant_lease(w))
    grant(L, w, fence, true)
  else
    redis.call('DEL', L)
  end
end
