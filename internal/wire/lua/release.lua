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
-- Returns 0 when released; 1 when the key is missing, 2 when it holds
-- another id (nothing is changed then).
local holder = redis.call('GET', KEYS[1])
if not holder then
  return 1
end
if holder ~= ARGV[1] then
  return 2
end
redis.call('DEL', KEYS[2])
redis.call('LPUSH', KEYS[2], 1)
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if KEYS[3] then
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
end
redis.call('DEL', KEYS[1])
return 0
