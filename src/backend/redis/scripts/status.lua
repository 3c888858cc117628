-- What the server knows of a lock. KEYS[1] lock hash, KEYS[2] fence
-- counter, KEYS[3] queue. Returns {owner or '', holds, fence, pttl,
-- last fence issued, queued waiters}.
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 'f')
return {h[1] or '', tonumber(h[2]) or 0, tonumber(h[3]) or 0, redis.call('PTTL', KEYS[1]),
        tonumber(redis.call('GET', KEYS[2])) or 0, redis.call('ZCARD', KEYS[3])}
