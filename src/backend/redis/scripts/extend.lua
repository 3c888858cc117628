-- SPDX-License-Identifier: MIT
-- Sets the lease of a lock the token holds. KEYS[1] the lock L.
-- ARGV[1] owner token, ARGV[2] lease ms, ARGV[3] '1' to only lengthen it
-- (re-entry), ARGV[4] 'r' for a read hold, 's' for a semaphore's permits,
-- else exclusive, ARGV[5] the fence the caller holds it under ('0' or none:
-- unknown). Returns 1, or 0 if the token does not hold it (a shared hold
-- whose lease end has passed is not held, even before anyone prunes it; a
-- hold the store granted the token's place after that fence is not the
-- caller's: renew.lua). A read hold that other handles of its owner count on (dlock_lock_dup:
-- its count above 1) is only lengthened: a short lease set through one cut
-- another's longer fixed lease (conformance rw_dup_leases).
local L, token, lease = KEYS[1], ARGV[1], tonumber(ARGV[2])
local g = ARGV[5] and ARGV[5] ~= '0' and redis.pcall('GET', L .. ':g:' .. token)
if type(g) == 'string' and tonumber(g) > tonumber(ARGV[5]) then
  return 0
end
if ARGV[4] == 's' or ARGV[4] == 'r' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ends = tonumber(redis.call('ZSCORE', L .. ':exp', token))
  if not ends or ends <= now or redis.call('HEXISTS', L .. ':holders', token) == 0 then
    return 0
  end
  local until_ms = now + lease
  if ARGV[3] == '1' or
      (ARGV[4] == 'r' and tonumber(redis.call('HGET', L .. ':holders', token)) > 1) then
    redis.call('ZADD', L .. ':exp', 'GT', until_ms, token)
  else
    redis.call('ZADD', L .. ':exp', 'XX', until_ms, token)
  end
  return 1
end
if redis.call('GET', L) ~= token then
  return 0
end
-- (a key without expiry, PTTL -1, stays so when only lengthening: a lease
-- of 0 then only checks the hold)
local pttl = redis.call('PTTL', L)
if ARGV[3] ~= '1' or (pttl >= 0 and pttl < lease) then
  redis.call('PEXPIRE', L, lease)
end
return 1
