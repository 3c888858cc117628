-- What the server knows of the lock KEYS[1]. KEYS[2] its fence counter.
-- ARGV[1] '1' if it has a queue (not an interop key). Returns {owner or '',
-- pttl, fence counter, queued waiters (live or not yet found dead)}.
return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),
        tonumber(redis.call('GET', KEYS[2])) or 0,
        ARGV[1] == '1' and redis.call('LLEN', KEYS[1] .. ':queue') or 0}
