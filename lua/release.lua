-- release: delete the lock if it holds our id and wake exactly one waiter.
-- Same effects as python-redis-lock's unlock script.
--
-- KEYS[1]  lock key
-- KEYS[2]  signal key (lock-signal:<name>)
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
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
redis.call('DEL', KEYS[1])
return 0
