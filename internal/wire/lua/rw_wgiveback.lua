-- rw_wgiveback: undo what a writer's acquire attempt may have done when
-- its reply was lost, and pass on a signal it popped; it also drops the
-- writer's registration (it no longer waits). sem_lib.lua and rw_lib.lua
-- come first.
--
-- KEYS     as rw_wacquire.lua's (no fence key)
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
-- ARGV[3]  "1" for the RWMutex's own random id
-- ARGV[4]  how long readers admitted here may hold writers back, in ms
--
-- Returns 1 when our writer key was released, 2 when the mutex was free
-- for writing and its waiters were signalled, 0 otherwise.
local k = {writer = KEYS[1], writerSignal = KEYS[2], readers = KEYS[3], waitingWriters = KEYS[4],
  readerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
redis.call('ZREM', k.waitingWriters, ARGV[1])
local holder = redis.call('GET', k.writer)
if holder and (holder ~= ARGV[1] or ARGV[3] ~= '1') then
  return 0
end
if holder then
  redis.call('DEL', k.writer)
  handoff(k, ARGV[2], ARGV[4])
  return 1
end
prune(k.readers)
if redis.call('ZCARD', k.readers) == 0 and redis.call('EXISTS', k.admit) == 0 then
  handoff(k, ARGV[2], ARGV[4])
  return 2
end
return 0
