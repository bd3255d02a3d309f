-- sem_reset: drop every holder of the semaphore, whoever holds, and wake
-- one waiter per permit. sem_lib.lua comes first.
--
-- KEYS[1]  holders
-- KEYS[2]  signal list
-- KEYS[3]  size key
-- ARGV[1]  signal expire in milliseconds
--
-- Returns how many holders were dropped, not counting expired ones.
prune(KEYS[1])
local n = redis.call('ZCARD', KEYS[1])
local size = tonumber(redis.call('GET', KEYS[3]) or '0')
redis.call('DEL', KEYS[1])
wake(KEYS[1], KEYS[2], KEYS[3], size, ARGV[1])
redis.call('DEL', KEYS[3])
return n
