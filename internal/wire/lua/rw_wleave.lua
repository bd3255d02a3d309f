-- rw_wleave: a writer stops waiting (its Lock gave up): take back its
-- registration; when no writer waits or holds any more, the readers that
-- wait behind it come in. sem_lib.lua and rw_lib.lua come first.
--
-- KEYS     as rw_wacquire.lua's (no fence key)
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
local k = {writer = KEYS[1], writerSignal = KEYS[2], readers = KEYS[3], waitingWriters = KEYS[4],
  readerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
redis.call('ZREM', k.waitingWriters, ARGV[1])
prune(k.waitingWriters)
keep(k.waitingWriters, k.waitingWriters)
if redis.call('EXISTS', k.waitingWriters) == 0 and redis.call('EXISTS', k.writer) == 0 then
  prune(k.waitingReaders)
  signal(k.readerSignal, redis.call('ZCARD', k.waitingReaders), ARGV[2])
end
return 0
