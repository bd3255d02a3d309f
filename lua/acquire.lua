-- acquire: take the lock when it is free, in one round trip.
--
-- KEYS[1]  lock key (lock:<name>)
-- ARGV[1]  owner id
-- ARGV[2]  expire in milliseconds; "0" means the key never expires
--
-- Returns a two-element array {status, pttl}:
--   {0, 0}     the key was free and now holds ARGV[1]
--   {1, pttl}  another owner holds it; pttl is its remaining PTTL (-1: no expire)
--   {2, pttl}  the key already holds ARGV[1] (a retried command, or a shared id)
local holder = redis.call('GET', KEYS[1])
if not holder then
  if ARGV[2] == '0' then
    redis.call('SET', KEYS[1], ARGV[1])
  else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  end
  return {0, 0}
end
local pttl = redis.call('PTTL', KEYS[1])
if holder == ARGV[1] then
  return {2, pttl}
end
return {1, pttl}
