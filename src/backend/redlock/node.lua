-- node.lua - the one script redlock:// runs on each of its N nodes (README.md).
-- KEYS[1]: the lock's key L = P:{E}; KEYS[2]: the name's fence counter L:fence;
-- KEYS[3] (take, release, status): the name's waiting marks P:{E}:waiting, a
-- sorted set of the tokens of polling waiters scored by when each mark ends (ms).
-- ARGV[1] names the step:
--   take TOKEN LEASE_MS OTHER MARK_MS RECORD INFO RECORD_MS
--                          -> {1, counter} taken (or already ours: lease set again);
--                             counter: the fence counter, moved on by the take and
--                             stored: one more than it was, or the node's clock in µs
--                             for a name it has no counter for
--                             {0, counter, pttl} held by another owner (counter as it
--                             is, or the node's clock if it has none)
--                             {0, counter, pttl, 1} OTHER, the name's key of the other
--                             layout (the interop key N, or the mutex's L), is held:
--                             one name is one lock. OTHER is looked at with pcall (an
--                             ACL may hide it); '' looks at nothing.
--                             MARK_MS > 0 (a waiter): when held, TOKEN's waiting mark is
--                             set for MARK_MS; taken, it goes. RECORD ~= '': the client's
--                             owner record goes too (SET RECORD INFO PX RECORD_MS).
--                             {0, counter, pttl, KIND} another kind of lock holds the
--                             name (README: the read-write lock): KIND 1 the other
--                             layout's key, 2 the read-write lock, 3 the mutex P:{E},
--                             4 the interop key N, 0 the same kind (readers, a writer, or
--                             a waiting writer's or mutex waiter's mark that a reader
--                             lets go first), 6 the same, readers holding it and a
--                             writer waiting first; {0, counter, -1, 9} the caller's TOKEN
--                             holds the name as another kind (it would wait for
--                             itself), {0, counter, -1, 8} a reader asking to write
--   rtake, wtake TOKEN LEASE_MS N MARK_MS RECORD INFO RECORD_MS SINCE
--                          -> as take, for a reader or the writer of the read-write
--                             lock: KEYS[1] is W = P:{E}:rw, KEYS[3] the kind's waiting
--                             marks (W:waiting of readers, W:writing of writers); SINCE
--                             the wait's place in line (README: the read-write lock's
--                             turns), '' on its first attempt: a reader is refused where
--                             a writer waits from before it, a writer where a reader
--                             does (a free name: KIND 7); held, the reply has a fifth
--                             element, the place the node keeps for TOKEN (SINCE, or
--                             its clock in ms)
--   fence VALUE            -> 1; the counter becomes max(counter, VALUE)
--   renew TOKEN LEASE_MS AT_LEAST -> 1 ours (lease set; with AT_LEAST only if that
--                             lengthens it; LEASE_MS 0 only confirms), 0 free, -1 another's
--   rrenew TOKEN LEASE_MS AT_LEAST -> renew, for a reader (its score in W:r; only
--                             lengthened while W:rc counts more than one hold of TOKEN)
--   release TOKEN KEEP_MARK -> 1 deleted, 0 free, -1 another's; TOKEN's waiting mark goes
--                             unless KEEP_MARK is '1' (a waiter's attempt giving back)
--   rrelease TOKEN KEEP_MARK -> release, for a reader (0: its lease had run out); one of
--                             TOKEN's holds off W:rc, its W:r entry gone with the last
--   status OTHER RECORDS   -> {L's value or '', its PTTL, OTHER's value or '', its PTTL,
--                             the fence counter, live waiting marks, the owner record of
--                             L's holder or '', of OTHER's or ''}; RECORDS: the records'
--                             key prefix (P:owner:), a record named by a token's first
--                             16 characters; with a fourth argument 'rw' (L is W): the
--                             waiting marks of readers and writers both, and three
--                             arrays: the live readers' tokens, their leases left (ms),
--                             their owner records
--   unlock OTHER [rw]      -> 1; L and OTHER ('' none) deleted (an operator's
--                             force-unlock); with 'rw' the readers W:r (and their
--                             counts W:rc) too
--   forget RECORD          -> 1; the client's owner record deleted
--   scan CURSOR PATTERN COUNT -> SCAN's reply
local op = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The readers' counts (W:rc, a field per token: its holds, dlock_lock_dup's
-- handles) live as long as the readers' entries (W:r, key R) do.
local function keep_counts(R, RC)
  local ttl = redis.call('PTTL', R)
  if ttl > 0 and redis.call('PTTL', RC) < ttl then
    redis.call('PEXPIRE', RC, ttl)
  end
end
-- A record's key for the holder value v: RECORDS followed by v's client id.
local function record_of(v)
  if v == '' or string.len(v) < 16 or not string.match(string.sub(v, 1, 16), '^[0-9a-f]+$') then
    return ''
  end
  local ok, r = pcall(redis.call, 'GET', ARGV[3] .. string.sub(v, 1, 16))
  if ok and type(r) == 'string' then return r end
  return ''
end
if op == 'take' then
  -- A take moves the name's counter on and stores it (README: the fence):
  -- one more than it was, so that nodes that agree stay agreed and the
  -- acquisition needs no write-back; or, for a name the node has no counter
  -- for (a new name, a node back without its data after the delayed restart
  -- the README asks for), the node's clock in microseconds, which is above
  -- every fence given before it went down as long as the nodes' clocks agree
  -- within that delay: a counter starts at a clock and grows by one a take,
  -- slower than the clock. (Lua's numbers hold microseconds since 1970
  -- exactly; '%.0f' writes them without an exponent.)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local stored = tonumber(redis.call('GET', KEYS[2]) or '')
  local counter = stored or now
  if ARGV[6] ~= '' then
    redis.pcall('SET', ARGV[6], ARGV[7], 'PX', ARGV[8])
  end
  local mark = tonumber(ARGV[5]) or 0
  local function held(reply)
    if mark > 0 then
      redis.call('ZADD', KEYS[3], math.floor(now / 1000) + mark, ARGV[2])
      if redis.call('PTTL', KEYS[3]) < mark then
        redis.call('PEXPIRE', KEYS[3], mark)
      end
    end
    return reply
  end
  local function taken()
    redis.call('ZREM', KEYS[3], ARGV[2])
    if stored then
      counter = stored + 1
    end
    redis.call('SET', KEYS[2], string.format('%.0f', counter))
    return {1, counter}
  end
  -- One name is one lock: the other layout's key (OTHER) and the name's
  -- read-write lock (W = M:rw, readers W:r, M = P:{E}) are probed in one
  -- EXISTS and looked at closer only when one exists. (pcall: an ACL may
  -- hide OTHER, N; then W and W:r are probed alone.)
  local M = string.sub(KEYS[2], 1, -7)
  local W = M .. ':rw'
  local R = W .. ':r'
  local found = redis.pcall('EXISTS', ARGV[4], W, R)
  if type(found) ~= 'number' then
    found = redis.call('EXISTS', W, R)
  end
  if found > 0 then
    local left = redis.pcall('PTTL', ARGV[4])
    if type(left) == 'number' and left ~= -2 then
      return held({0, counter, left, 1})
    end
    local writer = redis.call('GET', W)
    if writer == ARGV[2] then
      return {0, counter, -1, 9}
    end
    if writer then
      return held({0, counter, redis.call('PTTL', W), 2})
    end
    local ms = math.floor(now / 1000)
    redis.call('ZREMRANGEBYSCORE', R, '-inf', ms)
    if redis.call('ZSCORE', R, ARGV[2]) then
      return {0, counter, -1, 9}
    end
    local last = redis.call('ZRANGE', R, -1, -1, 'WITHSCORES')
    if last[2] then
      return held({0, counter, tonumber(last[2]) - ms, 2})
    end
  end
  if redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3]) then
    return taken()
  end
  if redis.call('GET', KEYS[1]) == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return taken()
  end
  return held({0, counter, redis.call('PTTL', KEYS[1])})
elseif op == 'rtake' or op == 'wtake' then
  -- The read-write lock (README): the writer's token in W with its lease
  -- as expiry, readers in W:r scored by their lease ends (ms of this node's
  -- clock, pruned at each look). It is taken only while the name's mutex M
  -- and interop key N are free, and the mutex take looks at W and W:r.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local ms = math.floor(now / 1000)
  local stored = tonumber(redis.call('GET', KEYS[2]) or '')
  local counter = stored or now
  if ARGV[6] ~= '' then
    redis.pcall('SET', ARGV[6], ARGV[7], 'PX', ARGV[8])
  end
  local token, lease, mark = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[5]) or 0
  local W, M = KEYS[1], string.sub(KEYS[2], 1, -7)
  local R, RC = W .. ':r', W .. ':rc'
  -- The waits' places in line (README: turns), beside their marks: K:since
  -- of the marks K, tokens scored by SINCE, which the client sends alike to
  -- every node (the first attempt's place, the node's clock, until then).
  local since = tonumber(ARGV[9] or '') or ms
  local places = KEYS[3] .. ':since'
  local function held(ttl, kind)
    if mark > 0 then
      redis.call('ZADD', KEYS[3], ms + mark, token)
      if redis.call('PTTL', KEYS[3]) < mark then
        redis.call('PEXPIRE', KEYS[3], mark)
      end
      redis.call('ZADD', places, since, token)
      if redis.call('PTTL', places) < mark then
        redis.call('PEXPIRE', places, mark)
      end
    end
    return {0, counter, ttl, kind, since}
  end
  -- Whether a wait of the other kind (its marks K) is in line before this
  -- one: its mark live and its place below SINCE. The places of marks that
  -- lapsed (a waiter gone) are pruned on the way.
  local function waits_before(K)
    local before = redis.call('ZRANGEBYSCORE', K .. ':since', '-inf', '(' .. since)
    for _, other in ipairs(before) do
      if other ~= token then
        local ends = tonumber(redis.call('ZSCORE', K, other))
        if ends and ends >= ms then
          return true
        end
        redis.call('ZREM', K .. ':since', other)
      end
    end
    return false
  end
  local function taken()
    redis.call('ZREM', KEYS[3], token)
    redis.call('ZREM', places, token)
    if stored then
      counter = stored + 1
    end
    redis.call('SET', KEYS[2], string.format('%.0f', counter))
    return {1, counter}
  end
  local function readers_left()
    local last = redis.call('ZRANGE', R, -1, -1, 'WITHSCORES')
    if last[2] then return tonumber(last[2]) - ms end
    return -1
  end
  redis.call('ZREMRANGEBYSCORE', R, '-inf', ms)
  local reading = redis.call('ZSCORE', R, token)
  if op == 'wtake' and reading then
    return {0, counter, -1, 8}
  end
  local m = redis.call('GET', M)
  if m == token then
    return {0, counter, -1, 9}
  end
  if m then
    return held(redis.call('PTTL', M), 3)
  end
  if ARGV[4] ~= '' then
    local left = redis.pcall('PTTL', ARGV[4])
    if type(left) == 'number' and left ~= -2 then
      return held(left, 4)
    end
  end
  local writer = redis.call('GET', W)
  if op == 'rtake' then
    -- (the writer's own token reads too: a downgrade)
    if writer and writer ~= token then
      return held(redis.call('PTTL', W), 0)
    end
    -- A writer waiting from before this reader, or a mutex waiter (their
    -- marks live), goes first: the reader does not join those in (README:
    -- turns). A writer that came later waits for this reader.
    -- (6: readers hold it and only a writer waits first: said so)
    if not writer and not reading then
      if redis.call('ZCOUNT', M .. ':waiting', ms, '+inf') > 0 then
        return held(readers_left(), 0)
      end
      if waits_before(W .. ':writing') then
        return held(readers_left(), redis.call('ZCARD', R) > 0 and 6 or 0)
      end
    end
    -- Handles of one owner (dlock_lock_dup) share its entry: counted in
    -- W:rc, its end the later of theirs (a second handle's shorter lease
    -- cut the first's, and one's release ended both)
    if reading then
      redis.call('HINCRBY', RC, token, 1)
      redis.call('ZADD', R, 'GT', ms + lease, token)
    else
      redis.call('HSET', RC, token, 1)
      redis.call('ZADD', R, ms + lease, token)
    end
    if redis.call('PTTL', R) < lease then
      redis.call('PEXPIRE', R, lease)
    end
    keep_counts(R, RC)
    return taken()
  end
  if writer == token then
    redis.call('PEXPIRE', W, lease)
    return taken()
  end
  if writer then
    return held(redis.call('PTTL', W), 0)
  end
  if redis.call('ZCARD', R) > 0 then
    return held(readers_left(), 0)
  end
  -- free, but a reader waiting from before this writer goes first
  if waits_before(W .. ':waiting') then
    return held(-1, 7)
  end
  redis.call('SET', W, token, 'PX', lease)
  return taken()
elseif op == 'fence' then
  local value = tonumber(ARGV[2])
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if value > counter then
    redis.call('SET', KEYS[2], ARGV[2])
  end
  return 1
elseif op == 'renew' then
  local v = redis.call('GET', KEYS[1])
  if v == ARGV[2] then
    local lease = tonumber(ARGV[3])
    if lease > 0 and (ARGV[4] == '0' or redis.call('PTTL', KEYS[1]) < lease) then
      redis.call('PEXPIRE', KEYS[1], lease)
    end
    return 1
  end
  if v then return -1 end
  return 0
elseif op == 'rrenew' then
  local R, now = KEYS[1] .. ':r', now_ms()
  local score = tonumber(redis.call('ZSCORE', R, ARGV[2]))
  if score and score > now then
    local lease = tonumber(ARGV[3])
    -- (an entry other handles of the owner count on is only lengthened)
    local shared = tonumber(redis.call('HGET', R .. 'c', ARGV[2]) or '1') > 1
    if lease > 0 and ((ARGV[4] == '0' and not shared) or score - now < lease) then
      redis.call('ZADD', R, now + lease, ARGV[2])
      if redis.call('PTTL', R) < lease then
        redis.call('PEXPIRE', R, lease)
      end
      keep_counts(R, R .. 'c')
    end
    return 1
  end
  if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
  return 0
elseif op == 'release' then
  -- (a writer's place in line, W:writing:since, goes with its mark)
  if ARGV[3] ~= '1' and redis.call('ZREM', KEYS[3], ARGV[2]) == 1 then
    redis.call('ZREM', KEYS[3] .. ':since', ARGV[2])
  end
  local v = redis.call('GET', KEYS[1])
  if v == ARGV[2] then
    redis.call('DEL', KEYS[1])
    return 1
  end
  if v then return -1 end
  return 0
elseif op == 'rrelease' then
  -- (its place in line, W:waiting:since, goes with its mark)
  if ARGV[3] ~= '1' and redis.call('ZREM', KEYS[3], ARGV[2]) == 1 then
    redis.call('ZREM', KEYS[3] .. ':since', ARGV[2])
  end
  local R = KEYS[1] .. ':r'
  local score = tonumber(redis.call('ZSCORE', R, ARGV[2]))
  if score then
    -- one hold of the owner's off its entry; the entry goes with the last
    if redis.call('HINCRBY', R .. 'c', ARGV[2], -1) <= 0 then
      redis.call('ZREM', R, ARGV[2])
      redis.call('HDEL', R .. 'c', ARGV[2])
    end
    if score > now_ms() then return 1 end
    return 0
  end
  if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
  return 0
elseif op == 'status' then
  -- (pcall: N is anyone's key, of any type, and an ACL may hide it)
  local okv, v = pcall(redis.call, 'GET', KEYS[1])
  if not okv or type(v) ~= 'string' then v = '' end
  local ok, o = pcall(redis.call, 'GET', ARGV[2])
  if not ok or type(o) ~= 'string' then o = '' end
  local ok2, opttl = pcall(redis.call, 'PTTL', ARGV[2])
  if not ok2 or type(opttl) ~= 'number' then opttl = -2 end
  local now = now_ms()
  local reply = {v, redis.call('PTTL', KEYS[1]), o, opttl,
                 tonumber(redis.call('GET', KEYS[2]) or '0') or 0,
                 redis.call('ZCOUNT', KEYS[3], now, '+inf'), record_of(v), record_of(o)}
  if ARGV[4] == 'rw' then
    local W = KEYS[1]
    reply[6] = redis.call('ZCOUNT', W .. ':waiting', now, '+inf') +
               redis.call('ZCOUNT', W .. ':writing', now, '+inf')
    local e = redis.call('ZRANGEBYSCORE', W .. ':r', '(' .. now, '+inf', 'WITHSCORES')
    local tokens, lefts, records = {}, {}, {}
    for i = 1, #e, 2 do
      tokens[#tokens + 1] = e[i]
      lefts[#lefts + 1] = tonumber(e[i + 1]) - now
      records[#records + 1] = record_of(e[i])
    end
    reply[9], reply[10], reply[11] = tokens, lefts, records
  end
  return reply
elseif op == 'unlock' then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then
    redis.pcall('DEL', ARGV[2])
  end
  if ARGV[3] == 'rw' then
    redis.call('DEL', KEYS[1] .. ':r', KEYS[1] .. ':rc')
  end
  return 1
elseif op == 'forget' then
  redis.call('DEL', ARGV[2])
  return 1
elseif op == 'scan' then
  return redis.call('SCAN', ARGV[2], 'MATCH', ARGV[3], 'COUNT', ARGV[4])
end
return redis.error_reply('redlock node.lua: unknown step ' .. tostring(op))
