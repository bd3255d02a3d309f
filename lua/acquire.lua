-- acquire: take the lock when it is free, in one round trip.
--
-- KEYS[1]  lock key (lock:<name>)
-- KEYS[2]  optional: fence key (lock-fence:<name>), when fencing tokens are on
-- ARGV[1]  owner id
-- ARGV[2]  expire in milliseconds; "0" means the key never expires
-- ARGV[3]  "1" when ARGV[1] is the Lock's own random id: a key already
--          holding it can only be our own earlier try whose reply was lost
--          (or a hold this Lock gave up on), so it is taken again, with a
--          fresh expire; "0" for a caller-given id that other Lock values
--          may share
--
-- Returns a two-element array {status, value}:
--   {0, token} the lock is now ours (the key was free, or held our random
--              id); token is the new fencing token, 0 without a fence key
--   {1, pttl}  another owner holds it; pttl is its remaining PTTL (-1: no expire)
--   {2, pttl}  the key already holds our caller-given id
--
-- The fencing token is the larger of the last token + 1 and the server's
-- clock in microseconds, so tokens only grow, even when the fence key was
-- lost (a restart without persistence) or rolled back (an old snapshot, a
-- replica that missed writes). Below 2^53 they are exact in Lua's doubles.

-- set writes our id with the lock's expire; extra options (NX) follow.
local function set(...)
  if ARGV[2] == '0' then
    return redis.call('SET', KEYS[1], ARGV[1], ...)
  end
  return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], ...)
end

if not set('NX') then
  local holder = redis.call('GET', KEYS[1])
  if holder ~= ARGV[1] or ARGV[3] ~= '1' then
    local pttl = redis.call('PTTL', KEYS[1])
    if holder == ARGV[1] then
      return {2, pttl}
    end
    return {1, pttl}
  end
  set() -- our own random id: take it again, with a fresh expire
end
if not KEYS[2] then
  return {0, 0}
end
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last + 1 > token then
  token = last + 1
end
redis.call('SET', KEYS[2], string.format('%.0f', token))
return {0, token}
