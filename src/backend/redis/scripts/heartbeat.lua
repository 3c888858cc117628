-- SPDX-License-Identifier: MIT
-- Keeps queued waiters' places: KEYS[i] the lock waiter i queues for,
-- ARGV[1] waiter lease ms, ARGV[i + 1] its owner token. Returns two
-- numbers per waiter:
--   1, 0      still queued (its place kept for another waiter lease, and
--             put back in the queue if the queue lost it)
--   2, fence  the lock was handed to it (it holds it, or a share of it);
--             fence 0 if the counter is gone (the client asks again)
--   0, 0      not queued any more (its place lapsed)
local wlease = tonumber(ARGV[1])
local out = {}
local now
-- a shared hold handed to the waiter, whose lease has not ended
local function holds_share(L, token)
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local ends = tonumber(redis.call('ZSCORE', L .. ':exp', token))
  return ends and ends > now and redis.call('HEXISTS', L .. ':holders', token) == 1
end
for i = 1, #KEYS do
  local L, token = KEYS[i], ARGV[i + 1]
  if redis.call('PEXPIRE', L .. ':w:' .. token, wlease) == 1 then
    -- A place the queue does not hold (the store lost the queue's key and
    -- kept the place) would never reach the head: it joins at the end.
    if not redis.call('LPOS', L .. ':queue', token) then
      redis.call('RPUSH', L .. ':queue', token)
    end
    redis.call('PEXPIRE', L .. ':queue', 2 * wlease)
    out[2 * i - 1], out[2 * i] = 1, 0
  elseif redis.call('GET', L) == token or holds_share(L, token) then
    out[2 * i - 1], out[2 * i] = 2, tonumber(redis.call('GET', L .. ':fence')) or 0
  else
    out[2 * i - 1], out[2 * i] = 0, 0
  end
end
return out
