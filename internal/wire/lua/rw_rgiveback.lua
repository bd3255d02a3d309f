-- rw_rgiveback: undo what a reader's acquire attempt may have done when
-- its reply was lost, and pass on a signal it popped (its queue's
-- registration is taken back by rw_rleave.lua when the queue empties).
-- sem_lib.lua and rw_lib.lua come first.
--
-- KEYS     as rw_racquire.lua's (no fence key)
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
-- ARGV[3]  "1" for the RWMutex's own random id
-- ARGV[4]  unused
--
-- Returns 1 when our read hold was released, 2 when a signal was passed
-- on, 0 otherwise.
local k = {readers = KEYS[1], readerSignal = KEYS[2], writer = KEYS[3], waitingWriters = KEYS[4],
  writerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
local result = 0
if ARGV[3] == '1' and redis.call('ZREM', k.readers, ARGV[1]) == 1 then
  result = 1
  lastReaderOut(k, ARGV[2])
end
if redis.call('EXISTS', k.admit) == 1 then
  -- The signal this attempt may have popped: for another admitted reader.
  redis.call('LPUSH', k.readerSignal, 1)
  redis.call('PEXPIRE', k.readerSignal, ARGV[2])
  if result == 0 then
    result = 2
  end
end
return result
