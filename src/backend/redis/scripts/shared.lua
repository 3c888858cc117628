-- SPDX-License-Identifier: MIT
-- Shared holders (readers, semaphore permits): follows queue.lua in the
-- scripts of the read-write lock and the semaphore.

-- Semaphore: the permits its holders have taken, summed from L:holders.
-- L:used counts them too, but only for clients of dlock 0.1, which read it:
-- this release keeps it up to date and never reads it, since the store may
-- lose it apart from the holders (eviction takes keys one at a time).
local function permits_used(L)
  local used = 0
  for _, n in ipairs(redis.call('HVALS', L .. ':holders')) do
    used = used + tonumber(n)
  end
  return used
end

-- Shared holders whose lease ran out are gone (their permits with them).
-- L:holders and L:exp name the same tokens, but the store may lose one and
-- keep the other: a holder without a lease end is gone too, and so is a
-- lease end without a holder. Every script that adds or removes a holder
-- prunes first, so the two can only differ in size after such a loss.
local function prune(L, now, permits)
  local H, E = L .. ':holders', L .. ':exp'
  local dead = redis.call('ZRANGEBYSCORE', E, '-inf', now)
  for _, t in ipairs(dead) do
    if permits then
      redis.call('DECRBY', L .. ':used', tonumber(redis.call('HGET', H, t)) or 0)
    end
    redis.call('HDEL', H, t)
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', E, '-inf', now)
  end
  if redis.call('HLEN', H) ~= redis.call('ZCARD', E) then
    for _, t in ipairs(redis.call('HKEYS', H)) do
      if not redis.call('ZSCORE', E, t) then
        redis.call('HDEL', H, t)
      end
    end
    for _, t in ipairs(redis.call('ZRANGE', E, 0, -1)) do
      if redis.call('HEXISTS', H, t) == 0 then
        redis.call('ZREM', E, t)
      end
    end
    if permits then
      redis.call('SET', L .. ':used', permits_used(L))
    end
  end
end

-- Makes token a shared holder (again) until now + lease.
local function hold_shared(L, token, count, now, lease, permits)
  if permits then
    redis.call('HSET', L .. ':holders', token, count)
    redis.call('INCRBY', L .. ':used', count)
  else
    redis.call('HINCRBY', L .. ':holders', token, count)
  end
  redis.call('ZADD', L .. ':exp', 'GT', now + lease, token) -- adds, or only lengthens
end

-- Read-write: admits from the head of the queue a writer if nobody holds
-- the lock, or every reader up to the first writer if no writer holds it.
local function admit_rw(L, now)
  if redis.call('EXISTS', L) == 1 then
    return
  end
  local readers = redis.call('HLEN', L .. ':holders')
  for _ = 1, 1000 do
    local w = live_head(L)
    if not w then
      return
    end
    if w[4] == 'w' then
      if readers == 0 then
        redis.call('SET', L, w[1], 'PX', grant_lease(w))
        grant(L, w, next_fence(counter_of(L)), true)
      end
      return
    end
    local had = redis.call('HEXISTS', L .. ':holders', w[1]) == 1
    hold_shared(L, w[1], 1, now, grant_lease(w), false)
    grant(L, w, next_fence(counter_of(L)), not had)
    readers = readers + 1
  end
end

-- Semaphore: admits waiters from the head while their permits fit (in
-- order: a big request at the head is not overtaken by small ones).
local function admit_sem(L, now)
  local cap = tonumber(redis.call('GET', L .. ':cap')) or 0
  local used = permits_used(L)
  for _ = 1, 1000 do
    local w = live_head(L)
    if not w or used + w[5] > cap then
      return
    end
    local had = redis.call('HEXISTS', L .. ':holders', w[1]) == 1
    hold_shared(L, w[1], w[5], now, grant_lease(w), true)
    used = used + w[5]
    grant(L, w, next_fence(counter_of(L)), not had)
  end
end
