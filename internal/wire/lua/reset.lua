-- reset: delete the lock whoever holds it and wake one waiter.
-- Same effects as python-redis-lock's reset script.
--
-- KEYS[1]  lock key
-- KEYS[2]  signal key
-- KEYS[3]  turn key (see release.lua)
-- ARGV[1]  signal expire in milliseconds
-- ARGV[2]  the turn, in milliseconds
--
-- Returns the number of lock keys deleted (0 or 1).
redis.call('DEL', KEYS[2])
redis.call('LPUSH', KEYS[2], 1)
redis.call('PEXPIRE', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
return redis.call('DEL', KEYS[1])
