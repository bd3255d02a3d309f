-- rw_reset: drop the writer and every reader, whoever holds, forget who
-- waits, and wake the waiters of both sides (they register again as they
-- try). sem_lib.lua and rw_lib.lua come first.
--
-- KEYS     as rw_wacquire.lua's (no fence key)
-- ARGV[1]  signal expire in milliseconds
--
-- Returns how many holds were dropped (the writer, and the readers that
-- had not expired).
local k = {writer = KEYS[1], writerSignal = KEYS[2], readers = KEYS[3], waitingWriters = KEYS[4],
  readerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
prune(k.readers)
prune(k.waitingReaders)
local n = redis.call('DEL', k.writer) + redis.call('ZCARD', k.readers)
signal(k.readerSignal, redis.call('ZCARD', k.waitingReaders), ARGV[1])
signal(k.writerSignal, 1, ARGV[1])
redis.call('DEL', k.readers, k.admit, k.waitingWriters, k.waitingReaders)
return n
