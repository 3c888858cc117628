-- SPDX-License-Identifier: MIT
-- Semaphore: returns the permits ARGV[1] holds, or with ARGV[2] '1' every
-- permit (operator), and admits waiters. KEYS[1] the semaphore L. ARGV[3]
-- the fence the caller holds them under ('0' or none: unknown).
-- Returns 0 released, -2 not held: also when the store granted the token's
-- place after that fence (renew.lua): those permits are not the caller's,
-- and go all the same.
local L, token = KEYS[1], ARGV[1]
local now, ours = now_ms(), 0
prune(L, now, true)
if ARGV[2] == '1' then
  redis.call('DEL', L .. ':holders', L .. ':exp', L .. ':used')
else
  local n = redis.call('HGET', L .. ':holders', token)
  if not n then
    return -2
  end
  local g = ARGV[3] and ARGV[3] ~= '0' and redis.pcall('GET', L .. ':g:' .. token)
  if type(g) == 'string' and tonumber(g) > tonumber(ARGV[3]) then
    ours = -2
  end
  redis.call('HDEL', L .. ':holders', token)
  redis.call('ZREM', L .. ':exp', token)
  redis.call('DECRBY', L .. ':used', n)
end
-- (after an operator's clearing, not while another kind holds the name:
-- the waiters may queue behind it, kinds.lua)
if ARGV[2] ~= '1' or not other_kind(string.sub(L, 1, -5), nil, 's') then
  admit_sem(L, now)
end
return ours
