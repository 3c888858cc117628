-- SPDX-License-Identifier: MIT
-- Shared holders (readers, semaphore permits): follows queue.lua in the
-- scripts of the read-write lock and the semaphore.

-- Shared holders whose lease ran out are gone (their permits with them).
local function prune(L, now, permits)
  local dead = redis.call('ZRANGEBYSCORE', L .. ':exp', '-inf', now)
  for _, t in ipairs(dead) do
    if permits then
      redis.call('DECRBY', L .. ':used', tonumber(redis.call('HGET', L .. ':holders', t)) or 0)
    end
    redis.call('HDEL', L .. ':holders', t)
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', L .. ':exp', '-inf', now)
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
        redis.call('SET', L, w[1], 'PX', w[2])
        grant(L, w, next_fence(L .. ':fence'))
      end
      return
    end
    hold_shared(L, w[1], 1, now, w[2], false)
    grant(L, w, next_fence(L .. ':fence'))
    readers = readers + 1
  end
end

-- Semaphore: admits waiters from the head while their permits fit (in
-- order: a big request at the head is not overtaken by small ones).
local function admit_sem(L, now)
  local cap = tonumber(redis.call('GET', L .. ':cap')) or 0
  for _ = 1, 1000 do
    local w = live_head(L)
    if not w or (tonumber(redis.call('GET', L .. ':used')) or 0) + w[5] > cap then
      return
    end
    hold_shared(L, w[1], w[5], now, w[2], true)
    grant(L, w, next_fence(L .. ':fence'))
  end
end
