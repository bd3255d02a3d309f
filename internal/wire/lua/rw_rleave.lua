-- rw_rleave: the last reader of a local wait queue stopped waiting (it
-- came in, or gave up): take back the queue's registration and its
-- admission; when that was the last admitted one and nobody reads, a
-- waiting writer is woken. sem_lib.lua and rw_lib.lua come first.
--
-- KEYS     as rw_racquire.lua's (no fence key)
-- ARGV[1]  the queue's token
-- ARGV[2]  signal expire in milliseconds
local k = {readers = KEYS[1], readerSignal = KEYS[2], writer = KEYS[3], waitingWriters = KEYS[4],
  writerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
redis.call('ZREM', k.waitingReaders, ARGV[1])
keep(k.waitingReaders, k.waitingReaders)
if redis.call('ZREM', k.admit, ARGV[1]) == 1 and redis.call('EXISTS', k.admit) == 0 then
  lastReaderOut(k, ARGV[2])
end
return 0
