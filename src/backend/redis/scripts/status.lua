-- SPDX-License-Identifier: MIT
-- What the server knows of a lock. KEYS[1] the lock L, KEYS[2] its fence
-- counter. ARGV[1] '1' if it has a queue (not an interop key), ARGV[2] 'r'
-- for a read-write lock, 's' for a semaphore (prunes lapsed holders first).
-- Returns {exclusive owner or '', its pttl, fence counter, queued waiters,
-- shared holders, permits taken, permits declared, ms until the last shared
-- lease ends}.
local L = KEYS[1]
local shared, used, cap, last = 0, 0, 0, -1
if ARGV[2] == 'r' or ARGV[2] == 's' then
  local now = now_ms()
  prune(L, now, ARGV[2] == 's')
  shared = redis.call('HLEN', L .. ':holders')
  if ARGV[2] == 's' then
    used = permits_used(L)
  end
  cap = tonumber(redis.call('GET', L .. ':cap')) or 0
  local e = redis.call('ZRANGE', L .. ':exp', -1, -1, 'WITHSCORES')
  if e[2] then
    last = tonumber(e[2]) - now
  end
end
return {redis.call('GET', L) or '', redis.call('PTTL', L),
        tonumber(redis.call('GET', KEYS[2])) or 0,
        ARGV[1] == '1' and redis.call('LLEN', L .. ':queue') or 0, shared, used, cap, last}
