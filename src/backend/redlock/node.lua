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
--   fence VALUE            -> 1; the counter becomes max(counter, VALUE)
--   renew TOKEN LEASE_MS AT_LEAST -> 1 ours (lease set; with AT_LEAST only if that
--                             lengthens it; LEASE_MS 0 only confirms), 0 free, -1 another's
--   release TOKEN KEEP_MARK -> 1 deleted, 0 free, -1 another's; TOKEN's waiting mark goes
--                             unless KEEP_MARK is '1' (a waiter's attempt giving back)
--   status OTHER RECORDS   -> {L's value or '', its PTTL, OTHER's value or '', its PTTL,
--                             the fence counter, live waiting marks, the owner record of
--                             L's holder or '', of OTHER's or ''}; RECORDS: the records'
--                             key prefix (P:owner:), a record named by a token's first
--                             16 characters
--   unlock OTHER           -> 1; L and OTHER deleted (an operator's force-unlock)
--   forget RECORD          -> 1; the client's owner record deleted
--   scan CURSOR PATTERN COUNT -> SCAN's reply
local op = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
  if ARGV[4] ~= '' then
    local left = redis.pcall('PTTL', ARGV[4])
    if type(left) == 'number' and left ~= -2 then
      return held({0, counter, left, 1})
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
elseif op == 'release' then
  if ARGV[3] ~= '1' then
    redis.call('ZREM', KEYS[3], ARGV[2])
  end
  local v = redis.call('GET', KEYS[1])
  if v == ARGV[2] then
    redis.call('DEL', KEYS[1])
    return 1
  end
  if v then return -1 end
  return 0
elseif op == 'status' then
  -- (pcall: N is anyone's key, of any type, and an ACL may hide it)
  local okv, v = pcall(redis.call, 'GET', KEYS[1])
  if not okv or type(v) ~= 'string' then v = '' end
  local ok, o = pcall(redis.call, 'GET', ARGV[2])
  if not ok or type(o) ~= 'string' then o = '' end
  local ok2, opttl = pcall(redis.call, 'PTTL', ARGV[2])
  if not ok2 or type(opttl) ~= 'number' then opttl = -2 end
  return {v, redis.call('PTTL', KEYS[1]), o, opttl,
          tonumber(redis.call('GET', KEYS[2]) or '0') or 0,
          redis.call('ZCOUNT', KEYS[3], now_ms(), '+inf'), record_of(v), record_of(o)}
elseif op == 'unlock' then
  redis.call('DEL', KEYS[1])
  redis.pcall('DEL', ARGV[2])
  return 1
elseif op == 'forget' then
  redis.call('DEL', ARGV[2])
  return 1
elseif op == 'scan' then
  return redis.call('SCAN', ARGV[2], 'MATCH', ARGV[3], 'COUNT', ARGV[4])
end
return redis.error_reply('redlock node.lua: unknown step ' .. tostring(op))
