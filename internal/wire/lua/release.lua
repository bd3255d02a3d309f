-- release: delete the lock if it holds our id and wake exactly one waiter.
-- Same effects as python-redis-lock's unlock script.
--
-- KEYS[1]  lock key
-- KEYS[2]  signal key (lock-signal:<name>)
-- KEYS[3]  optional: turn key (lock-signal:<name>:turn)
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
-- ARGV[3]  with KEYS[3]: the turn, in milliseconds
--
-- Beyond python-redis-lock's effects it sets the turn key, which Python
-- ignores: for that long, a waiter woken by this release (it popped the
-- signal) may take the lock before any acquire of this library that was
-- not woken (see acquire.lua). A python-redis-lock waiter needs a second
-- round trip to take the lock after its BLPOP; without the turn, a
-- releaser that acquires again at once would win that race most times.
--
-- The signal list is left holding one element, as python-redis-lock's
-- DEL then LPUSH leaves it: an LPUSH onto a list that still holds an
-- earlier signal (no one took it) is trimmed back to one. The lock key is
-- deleted first: Redis lets a script's writes through under OOM (maxmemory
-- reached) once it has written, and a DEL it always lets through.
--
-- The turn key holds the id of the last release's owner (Python ignores
-- it). A release that finds the signal list empty (a waiter took the last
-- signal) and the turn set by another owner (someone else held the lock
-- since our last release) is a hand-off under contention: a waiter is
-- likely to take this signal too. It returns 3, so that the releaser, if
-- it acquires again, waits its turn behind that waiter instead of trying
-- first (see core.handedOff). SET with GET needs Redis 6.2; on 6.0 the
-- turn is read, then set (two more commands). A signal key or turn key of
-- another type is replaced, as python-redis-lock's DEL then LPUSH replaces
-- the signal key.
--
-- Returns 0 when released (3: released, and handed off); 1 when the key
-- is missing, 2 when it holds another id (nothing is changed then).
local holder = redis.call('GET', KEYS[1])
if not holder then
  return 1
end
if holder ~= ARGV[1] then
  return 2
end
redis.call('DEL', KEYS[1])
local n = redis.pcall('LPUSH', KEYS[2], 1)
if type(n) == 'table' then -- not a list (WRONGTYPE): replaced, as DEL then LPUSH does
  redis.call('DEL', KEYS[2])
  n = redis.call('LPUSH', KEYS[2], 1)
elseif n > 1 then
  redis.call('LTRIM', KEYS[2], 0, 0)
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if not KEYS[3] then
  return 0
end
local last = redis.pcall('SET', KEYS[3], ARGV[1], 'PX', ARGV[3], 'GET')
if type(last) == 'table' then -- Redis 6.0 (no SET ... GET), or a turn key of another type
  last = redis.pcall('GET', KEYS[3])
  if type(last) == 'table' then
    last = false
  end
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3])
end
if n == 1 and last and last ~= ARGV[1] then
  return 3
end
return 0
