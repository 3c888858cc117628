-- Interop mode state. KEYS[1] lock key, KEYS[2] fence counter.
-- Returns {owner or '', pttl, last fence issued}.
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        tonumber(redis.call('GET', KEYS[2])) or 0}
