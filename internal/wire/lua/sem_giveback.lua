-- sem_giveback: undo what an acquire attempt may have done when its reply
-- was lost, or give back a signal its BLPOP popped when it took no permit.
-- sem_lib.lua comes first.
--
-- KEYS[1]  holders
-- KEYS[2]  signal list
-- KEYS[3]  size key
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
-- ARGV[3]  "1" when the id is the Semaphore's own random id, whose permit
--          can only be ours and is given back; "0" for a given id
-- ARGV[4]  unused (the Lock's turn)
--
-- Returns 1 when our permit was given back, 2 when a permit was free and
-- a signal was pushed for the next waiter, 0 otherwise.
local freed = prune(KEYS[1])
local result = 0
if ARGV[3] == '1' and redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  result = 1
  freed = freed + 1
end
-- The signal this attempt may have popped: one more for a free permit.
if wake(KEYS[1], KEYS[2], KEYS[3], freed + 1, ARGV[2]) > 0 and result == 0 then
  result = 2
end
keep(KEYS[1], KEYS[3])
return result
