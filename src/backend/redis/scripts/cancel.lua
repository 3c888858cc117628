-- SPDX-License-Identifier: MIT
-- A waiter gives up: leaves the queue of KEYS[1], and if the lock was
-- handed to it meanwhile (ARGV[2] says how: 'x' exclusive, 'r' a read
-- hold, 's' permits), passes it on. ARGV[1] owner token.
-- Returns 1 if it passed the lock on, else 0.
local L, token, kind = KEYS[1], ARGV[1], ARGV[2]
leave(L, token)
if kind == 'x' then
  if redis.call('GET', L) == token then
    admit_exclusive(L)
    return 1
  end
elseif kind == 'w' then
  if redis.call('GET', L) == token then
    redis.call('DEL', L)
    local now = now_ms()
    prune(L, now, false) -- before anyone is admitted (shared.lua)
    admit_rw(L, now)
    return 1
  end
else
  local now = now_ms()
  prune(L, now, kind == 's') -- a share whose lease ran out is not passed on
  if redis.call('HEXISTS', L .. ':holders', token) == 1 then
    if kind == 'r' then
      if redis.call('HINCRBY', L .. ':holders', token, -1) <= 0 then
        redis.call('HDEL', L .. ':holders', token)
        redis.call('ZREM', L .. ':exp', token)
      end
      admit_rw(L, now)
    else
      redis.call('DECRBY', L .. ':used', redis.call('HGET', L .. ':holders', token))
      redis.call('HDEL', L .. ':holders', token)
      redis.call('ZREM', L .. ':exp', token)
      admit_sem(L, now)
    end
    return 1
  end
end
return 0
