-- rw_rrelease: release our read hold; the last reader out wakes a waiting
-- writer. sem_lib.lua and rw_lib.lua come first.
--
-- KEYS     as rw_racquire.lua's (no fence key)
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
-- ARGV[3]  unused
--
-- Returns 0 when released; 1 when our id held no read (it expired, or was
-- reset).
local k = {readers = KEYS[1], readerSignal = KEYS[2], writer = KEYS[3], waitingWriters = KEYS[4],
  writerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
prune(k.readers)
local result = 1
if redis.call('ZREM', k.readers, ARGV[1]) == 1 then
  result = 0
end
lastReaderOut(k, ARGV[2])
return result
