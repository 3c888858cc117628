-- SPDX-License-Identifier: MIT
-- Read-write lock: gives up a read hold (ARGV[2] 'r') or the write hold
-- ('w') of ARGV[1], or with ARGV[3] '1' clears every holder (operator), and
-- admits waiters. KEYS[1] the lock L. ARGV[4] the fence the caller holds it
-- under ('0' or none: unknown).
-- Returns 0 released, -1 held by another owner, -2 not held: also when the
-- store granted the token's place after that fence (renew.lua): that hold
-- is not the caller's, and goes all the same.
local L, token = KEYS[1], ARGV[1]
local now = now_ms()
local g = ARGV[3] ~= '1' and ARGV[4] and ARGV[4] ~= '0' and redis.pcall('GET', L .. ':g:' .. token)
local ours = type(g) == 'string' and tonumber(g) > tonumber(ARGV[4]) and -2 or 0
prune(L, now, false)
if ARGV[3] == '1' then
  redis.call('DEL', L, L .. ':holders', L .. ':exp')
elseif ARGV[2] == 'w' then
  local owner = redis.call('GET', L)
  if not owner then
    return -2
  end
  if owner ~= token then
    return -1
  end
  redis.call('DEL', L)
else
  if redis.call('HEXISTS', L .. ':holders', token) == 0 then
    return -2
  end
  if redis.call('HINCRBY', L .. ':holders', token, -1) <= 0 then
    redis.call('HDEL', L .. ':holders', token)
    redis.call('ZREM', L .. ':exp', token)
  end
end
-- (after an operator's clearing, not while another kind holds the name:
-- the waiters may queue behind it, kinds.lua)
if ARGV[3] ~= '1' or not other_kind(string.sub(L, 1, -4), nil, 'r') then
  admit_rw(L, now)
end
return ours
