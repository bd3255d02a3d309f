-- rw_reset: drop the writer and every reader, whoever holds, and hand
-- off as a writer's release does. sem_lib.lua and rw_lib.lua come first.
--
-- KEYS     as rw_wacquire.lua's (no fence key)
-- ARGV[1]  signal expire in milliseconds
--
-- Returns how many holds were dropped (the writer, and the readers that
-- had not expired).
local k = {writer = KEYS[1], writerSignal = KEYS[2], readers = KEYS[3], waitingWriters = KEYS[4],
  readerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
prune(k.readers)
local n = redis.call('DEL', k.writer) + redis.call('ZCARD', k.readers)
redis.call('DEL', k.readers, k.admit)
handoff(k, ARGV[1])
return n
