-- SPDX-License-Identifier: MIT
-- Read-write lock: gives up a read hold (ARGV[2] 'r') or the write hold
-- ('w') of ARGV[1], or with ARGV[3] '1' clears every holder (operator), and
-- admits waiters. KEYS[1] the lock L.
-- Returns 0 released, -1 held by another owner, -2 not held.
local L, token = KEYS[1], ARGV[1]
local now = now_ms()
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
return 0
