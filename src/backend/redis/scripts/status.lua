-- What the server knows of a lock. KEYS[1] lock, KEYS[2] fence counter,
-- [KEYS[3] queue]. Returns {owner or '', pttl, fence counter, queued
-- waiters (live or not yet found dead)}.
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        tonumber(redis.call('GET', KEYS[2])) or 0, KEYS[3] and redis.call('ZCARD', KEYS[3]) or 0}
