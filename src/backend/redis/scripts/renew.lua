-- SPDX-License-Identifier: MIT
-- Renews a batch of held locks: KEYS[i] lock, ARGV[1] lease ms, ARGV[2]
-- 's' for shared holds (readers, permits), else exclusive; ARGV[i + 2] the
-- owner token, ARGV[#KEYS + i + 2] the fence its client holds it under ('0'
-- unknown). Only a hold its token still has is renewed: a lapsed lock is
-- never taken back (a shared hold whose lease end has passed is over, even
-- before anyone prunes it), nor one the store granted the token's place
-- after that fence (queue.lua's grant: a place a failover brought back,
-- served again; the client's hold is gone). Returns one 1 (renewed) or 0
-- per key.
local out, lease, n = {}, tonumber(ARGV[1]), #KEYS
local now, until_ms
if ARGV[2] == 's' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  until_ms = now + lease
end
for i = 1, n do
  local token, fence = ARGV[i + 2], ARGV[n + i + 2]
  local g = fence and fence ~= '0' and redis.pcall('GET', KEYS[i] .. ':g:' .. token)
  if type(g) == 'string' and tonumber(g) > tonumber(fence) then
    out[i] = 0
  elseif until_ms then
    local ends = tonumber(redis.call('ZSCORE', KEYS[i] .. ':exp', token))
    if ends and ends > now and redis.call('HEXISTS', KEYS[i] .. ':holders', token) == 1 then
      redis.call('ZADD', KEYS[i] .. ':exp', 'GT', until_ms, token)
      out[i] = 1
    else
      out[i] = 0
    end
  elseif redis.call('GET', KEYS[i]) == token then
    redis.call('PEXPIRE', KEYS[i], lease)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
