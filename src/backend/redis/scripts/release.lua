-- Gives up holds of the lock; at zero, hands it to the next waiter.
-- KEYS as acquire.lua. ARGV[1] owner token, ARGV[2] holds to give up
-- ('0' = all of them), ARGV[3] '1' to force (operator: ignore the owner),
-- ARGV[4] channel prefix ('P:{N}:wake:').
-- Returns {left} (left >= 0), {-1} held by another owner, {-2} not held.
local owner = redis.call('HGET', KEYS[1], 'o')
if ARGV[3] ~= '1' then
  if not owner then
    return {-2}
  end
  if owner ~= ARGV[1] then
    return {-1}
  end
  if ARGV[2] ~= '0' then
    local n = redis.call('HINCRBY', KEYS[1], 'n', -1)
    if n > 0 then
      return {n}
    end
  end
end
handoff(ARGV[4])
return {0}
