-- rw_racquire: take the RWMutex for reading when no writer holds it and
-- none waits (or when this reader is admitted after a writer), in one
-- round trip; else register as a waiting reader. sem_lib.lua and
-- rw_lib.lua come first.
--
-- KEYS[1]  readers (lock-rw-readers:{<name>})
-- KEYS[2]  readers' signal list
-- KEYS[3]  writer key
-- KEYS[4]  waiting writers
-- KEYS[5]  writers' signal list
-- KEYS[6]  waiting readers
-- KEYS[7]  admitted readers
-- KEYS[8]  optional: fence key
-- ARGV[1]  owner id
-- ARGV[2]  expire in milliseconds (> 0)
-- ARGV[3]  "1" for the RWMutex's own random id
-- ARGV[4]  try mode: "3" for a try that will not wait (TryRLock), which
--          registers nothing; the others act alike
-- ARGV[5]  how long a registration as a waiting reader lasts, in ms
-- ARGV[6]  the registration: the token of the caller's local wait queue,
--          which stands for every reader waiting in it (one process, one
--          client); rw_rleave.lua takes it back when that queue empties
--
-- Returns {0, token} when held for reading; {1, ms} when busy; {2, ms}
-- when our caller-given id reads already.
local k = {readers = KEYS[1], readerSignal = KEYS[2], writer = KEYS[3], waitingWriters = KEYS[4],
  writerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
prune(k.readers)
prune(k.waitingWriters)
prune(k.waitingReaders)
local function busy(ms)
  if ARGV[4] ~= '3' then
    register(k.waitingReaders, ARGV[6], ARGV[5])
  end
  return {1, ms}
end
if redis.call('EXISTS', k.writer) == 1 then
  return busy(redis.call('PTTL', k.writer))
end
local mine = redis.call('ZSCORE', k.readers, ARGV[1])
if mine and ARGV[3] ~= '1' then
  return {2, tonumber(mine) - now}
end
local admitted = redis.call('ZSCORE', k.admit, ARGV[6])
if not mine and not admitted then
  local first = redis.call('ZRANGE', k.waitingWriters, 0, 0, 'WITHSCORES')
  if #first > 0 then
    return busy(math.max(tonumber(first[2]) - now, 1))
  end
end
redis.call('ZADD', k.readers, now + tonumber(ARGV[2]), ARGV[1])
keep(k.readers, k.readers)
return {0, token(KEYS[8])}
