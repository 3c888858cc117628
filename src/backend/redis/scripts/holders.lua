-- SPDX-License-Identifier: MIT
-- Who holds a lock now, changing nothing. KEYS[1] the lock L. ARGV[1] 'r'
-- for a read-write lock, 's' for a semaphore: their shared holders whose
-- lease has not run out are listed too. Returns {exclusive owner or '',
-- token, holds or permits, token, holds or permits, ...}.
local L = KEYS[1]
local out = {redis.call('GET', L) or ''}
if ARGV[1] == 'r' or ARGV[1] == 's' then
  local live = redis.call('ZRANGEBYSCORE', L .. ':exp', '(' .. now_ms(), '+inf')
  for _, t in ipairs(live) do
    local n = redis.call('HGET', L .. ':holders', t)
    if n then
      out[#out + 1] = t
      out[#out + 1] = n
    end
  end
end
return out
