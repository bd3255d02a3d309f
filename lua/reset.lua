-- reset: delete the lock whoever holds it and wake one waiter.
-- Same effects as python-redis-lock's reset script.
--
-- KEYS[1]  lock key
-- KEYS[2]  signal key
-- ARGV[1]  signal expire in milliseconds
--
-- Returns the number of lock keys deleted (0 or 1).
redis.call('DEL', KEYS[2])
redis.call('LPUSH', KEYS[2], 1)
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
