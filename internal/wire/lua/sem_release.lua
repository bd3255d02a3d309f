-- sem_release: give back our permit and wake one waiter for each permit
-- freed (ours, and any that expired meanwhile). sem_lib.lua comes first.
--
-- KEYS[1]  holders
-- KEYS[2]  signal list
-- KEYS[3]  size key
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
-- ARGV[3]  unused (the Lock's turn)
--
-- Returns 0 when released; 1 when our id held no permit (it expired, was
-- reset, or was never taken), and nothing of ours is changed then.
local result = 1
local freed = prune(KEYS[1])
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  result = 0
  freed = freed + 1
end
wake(KEYS[1], KEYS[2], KEYS[3], freed, ARGV[2])
keep(KEYS[1], KEYS[3])
return result
