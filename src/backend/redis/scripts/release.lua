-- SPDX-License-Identifier: MIT
-- Mutex: releases the lock KEYS[1] and hands it to the next waiter.
-- ARGV[1] owner token, ARGV[2] mode: '' normal, 'f' force (operator:
-- whoever holds it), 's' simple (interop key: no queue), ARGV[3] the fence
-- the caller holds it under ('0' or none: unknown).
-- Returns 0 released, -1 held by another owner, -2 not held: also when the
-- store granted the token's place after that fence (renew.lua): that hold
-- is not the caller's, and goes all the same.
local L = KEYS[1]
local owner = redis.call('GET', L)
local ours = 0
if ARGV[2] ~= 'f' then
  if not owner then
    return -2
  end
  if owner ~= ARGV[1] then
    return -1
  end
  local g = ARGV[3] and ARGV[3] ~= '0' and redis.pcall('GET', L .. ':g:' .. ARGV[1])
  if type(g) == 'string' and tonumber(g) > tonumber(ARGV[3]) then
    ours = -2
  end
end
local head = ARGV[2] ~= 's' and redis.call('LINDEX', L .. ':queue', 0)
if not head then
  -- Nobody waits: the common case, done before the queue's functions are
  -- defined, which would cost the server a fifth more time per release.
  redis.call('DEL', L)
  return ours
end
-- @prelude
if ARGV[2] == 'f' and other_kind(L, nil, 'x') then
  -- an operator's unlock of a mutex whose waiters queue behind another
  -- kind's holders (kinds.lua): they take it when that kind lets go
  redis.call('DEL', L)
  return ours
end
admit_exclusive(L, head)
return ours
