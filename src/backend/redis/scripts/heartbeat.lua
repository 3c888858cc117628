-- SPDX-License-Identifier: MIT
-- Keeps queued waiters' places: KEYS[i] the lock waiter i queues for,
-- ARGV[1] waiter lease ms, ARGV[i + 1] its owner token. Returns two
-- numbers per waiter:
--   1, 0      still queued (its place kept for another waiter lease, and
--             put back in the queue if the queue lost it)
--   2, fence  the lock was handed to it (it holds it, or a share of it);
--             fence 0 if the counter is gone (the client asks again)
--   0, 0      not queued any more (its place lapsed)
-- A lock found free (or with a share whose lease ran out) while waiters
-- queue for it lapsed without a release: its holder died, or it was handed
-- to a waiter that died (a hand-over carries only the rest of the waiter's
-- place). It is handed on here, so the waiters behind learn it within a
-- heartbeat, not when their wait's bound (the holder's lease) ends.
local wlease = tonumber(ARGV[1])
local out = {}
local now = now_ms()

-- a shared hold handed to the waiter, whose lease has not ended
local function holds_share(L, token)
  local ends = tonumber(redis.call('ZSCORE', L .. ':exp', token))
  return ends and ends > now and redis.call('HEXISTS', L .. ':holders', token) == 1
end

-- Hands on a lock of kind k ('x' mutex, 'r' or 'w' read-write, 's'
-- semaphore) that lapsed with waiters queued.
local function admit_lapsed(L, k)
  -- the name's mutex key, and whether another kind holds the name (its
  -- waiters may queue behind another kind: kinds.lua)
  local M = (k == 'r' or k == 'w') and string.sub(L, 1, -4) or k == 's' and string.sub(L, 1, -5) or L
  local other = other_kind(M, nil, (k == 'r' or k == 'w') and 'r' or k)
  if other then
    return
  end
  if k == 'x' then
    if redis.call('EXISTS', L) == 0 then
      admit_exclusive(L)
    end
    return
  end
  local first = redis.call('ZRANGE', L .. ':exp', 0, 0, 'WITHSCORES')
  local lapsed = first[2] and tonumber(first[2]) <= now
  if k == 's' then
    if lapsed or not first[2] then
      prune(L, now, true)
      admit_sem(L, now)
    end
  elseif lapsed or (not first[2] and redis.call('EXISTS', L) == 0) then
    prune(L, now, false)
    admit_rw(L, now)
  end
end

for i = 1, #KEYS do
  local L, token = KEYS[i], ARGV[i + 1]
  local place = L .. ':w:' .. token
  if redis.call('PEXPIRE', place, wlease) == 1 then
    -- A place the queue does not hold (the store lost the queue's key and
    -- kept the place) would never reach the head: it joins at the end.
    if not redis.call('LPOS', L .. ':queue', token) then
      redis.call('RPUSH', L .. ':queue', token)
    end
    redis.call('PEXPIRE', L .. ':queue', 2 * wlease)
    local k = string.match(redis.call('GET', place) or '', '^%d+ %x+ (%a) ')
    if k then
      admit_lapsed(L, k)
    end
  end
  if redis.call('EXISTS', place) == 1 then
    out[2 * i - 1], out[2 * i] = 1, 0
  elseif redis.call('GET', L) == token or holds_share(L, token) then
    out[2 * i - 1], out[2 * i] = 2, tonumber(redis.call('GET', counter_of(L))) or 0
  else
    out[2 * i - 1], out[2 * i] = 0, 0
  end
end
return out
