-- SPDX-License-Identifier: MIT
-- Mutex: releases the lock KEYS[1] and hands it to the next waiter.
-- ARGV[1] owner token, ARGV[2] mode: '' normal, 'f' force (operator:
-- whoever holds it), 's' simple (interop key: no queue).
-- Returns 0 released, -1 held by another owner, -2 not held.
local L = KEYS[1]
local owner = redis.call('GET', L)
if ARGV[2] ~= 'f' then
  if not owner then
    return -2
  end
  if owner ~= ARGV[1] then
    return -1
  end
end
local head = ARGV[2] ~= 's' and redis.call('LINDEX', L .. ':queue', 0)
if not head then
  -- Nobody waits: the common case, done before the queue's functions are
  -- defined, which would cost the server a fifth more time per release.
  redis.call('DEL', L)
  return 0
end
-- @prelude
if ARGV[2] == 'f' and other_kind(L, nil, 'x') then
  -- an operator's unlock of a mutex whose waiters queue behind another
  -- kind's holders (kinds.lua): they take it when that kind lets go
  redis.call('DEL', L)
  return 0
end
admit_exclusive(L, head)
return 0
