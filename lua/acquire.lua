-- acquire: take the lock when it is free, in one round trip.
--
-- KEYS[1]  lock key (lock:<name>)
-- ARGV[1]  owner id
-- ARGV[2]  expire in milliseconds; "0" means the key never expires
-- ARGV[3]  "1" when ARGV[1] is the Lock's own random id: a key already
--          holding it can only be our own earlier try whose reply was lost
--          (or a hold this Lock gave up on), so it is taken again, with a
--          fresh expire; "0" for a caller-given id that other Lock values
--          may share
--
-- Returns a two-element array {status, pttl}:
--   {0, 0}     the lock is now ours (the key was free, or held our random id)
--   {1, pttl}  another owner holds it; pttl is its remaining PTTL (-1: no expire)
--   {2, pttl}  the key already holds our caller-given id
local holder = redis.call('GET', KEYS[1])
if holder and (holder ~= ARGV[1] or ARGV[3] ~= '1') then
  local pttl = redis.call('PTTL', KEYS[1])
  if holder == ARGV[1] then
    return {2, pttl}
  end
  return {1, pttl}
end
if ARGV[2] == '0' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return {0, 0}
