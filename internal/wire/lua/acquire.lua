-- acquire: take the lock when it is free, in one round trip.
--
-- KEYS[1]  lock key (lock:<name>)
-- KEYS[2]  signal key (lock-signal:<name>), and
-- KEYS[3]  turn key (lock-signal:<name>:turn), unless ARGV[4] is "0"
-- KEYS[4]  optional (KEYS[2] when ARGV[4] is "0"): fence key
--          (lock-fence:<name>), when fencing tokens are on
-- ARGV[1]  owner id
-- ARGV[2]  expire in milliseconds; "0" means the key never expires
-- ARGV[3]  "1" when ARGV[1] is the Lock's own random id: a key already
--          holding it can only be our own earlier try whose reply was lost
--          (or a hold this Lock gave up on), so it is taken again, with a
--          fresh expire; "0" for a caller-given id that other Lock values
--          may share
-- ARGV[4]  the turn: a release by this library sets the turn key for a
--          moment (see release.lua). While it is there and the signal list
--          is not (a waiter popped the signal and has not yet taken the
--          lock: a python-redis-lock waiter needs a second round trip for
--          its SET NX), the lock is that waiter's turn.
--          "1": a try that was not woken: during a turn the free lock
--               counts as busy, and {1, PTTL of the turn key} is returned;
--          "2": the try pipelined behind a BLPOP, which may have been the
--               one woken: it may take the lock (the turn key is left to
--               lapse: it matters only while the lock is free, and the
--               next release sets it again);
--          "0": no turn keys (a cluster slot that migrates answers
--               TRYAGAIN to a script on several keys, some missing)
--
-- Returns a two-element array {status, value}:
--   {0, token} the lock is now ours (the key was free, or held our random
--              id); token is the new fencing token, 0 without a fence key
--   {1, pttl}  another owner holds it, or it is a woken waiter's turn;
--              pttl is the time left of either (-1: no expire)
--   {2, pttl}  the key already holds our caller-given id
--
-- The fencing token is the larger of the last token + 1 and the server's
-- clock in microseconds, so tokens only grow, even when the fence key was
-- lost (a restart without persistence) or rolled back (an old snapshot, a
-- replica that missed writes). Below 2^53 they are exact in Lua's doubles.

local fence = KEYS[4]
if ARGV[4] == '0' then
  fence = KEYS[2]
end

if ARGV[4] == '1' and redis.call('EXISTS', KEYS[1], KEYS[2]) == 0
    and redis.call('EXISTS', KEYS[3]) == 1 then
  return {1, redis.call('PTTL', KEYS[3])}
end

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
if not fence then
  return {0, 0}
end
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local last = tonumber(redis.call('GET', fence) or '0')
if last + 1 > token then
  token = last + 1
end
redis.call('SET', fence, string.format('%.0f', token))
return {0, token}
