-- rw_wrelease: release the RWMutex held for writing, if the writer key
-- holds our id; the readers that wait go next, or else one writer.
-- sem_lib.lua and rw_lib.lua come first.
--
-- KEYS     as rw_wacquire.lua's (no fence key)
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
-- ARGV[3]  how long the readers admitted here may hold writers back, in
--          ms (where the Lock's release has its turn)
--
-- Returns 0 when released; 1 when the writer key is missing; 2 when it
-- holds another id (nothing is changed then).
local k = {writer = KEYS[1], writerSignal = KEYS[2], readers = KEYS[3], waitingWriters = KEYS[4],
  readerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
local holder = redis.call('GET', k.writer)
if not holder then
  return 1
end
if holder ~= ARGV[1] then
  return 2
end
redis.call('DEL', k.writer)
handoff(k, ARGV[2], ARGV[3])
return 0
