-- rw_wacquire: take the RWMutex for writing when nobody holds it, in one
-- round trip; else register as a waiting writer, which makes new readers
-- wait. sem_lib.lua and rw_lib.lua come first.
--
-- KEYS[1]  writer key (lock-rw:{<name>})
-- KEYS[2]  writers' signal list
-- KEYS[3]  readers
-- KEYS[4]  waiting writers
-- KEYS[5]  readers' signal list
-- KEYS[6]  waiting readers
-- KEYS[7]  admitted readers
-- KEYS[8]  optional: fence key
-- ARGV[1]  owner id
-- ARGV[2]  expire in milliseconds; "0": the writer key never expires
-- ARGV[3]  "1" for the RWMutex's own random id (see acquire.lua)
-- ARGV[4]  try mode: "3" for a try that will not wait (TryLock), which
--          registers nothing; the others ("1", "2", "0") act alike
-- ARGV[5]  how long a registration as a waiting writer lasts, in ms
--
-- Returns {0, token} when held for writing; {1, ms} when busy, ms until
-- what holds it up may end (-1: a writer without expire); {2, pttl} when
-- the writer key holds our caller-given id.
local k = {writer = KEYS[1], writerSignal = KEYS[2], readers = KEYS[3], waitingWriters = KEYS[4],
  readerSignal = KEYS[5], waitingReaders = KEYS[6], admit = KEYS[7]}
prune(k.waitingWriters)
local function busy(ms)
  if ARGV[4] ~= '3' then
    register(k.waitingWriters, ARGV[1], ARGV[5])
  end
  return {1, ms}
end
local holder = redis.call('GET', k.writer)
if holder and (holder ~= ARGV[1] or ARGV[3] ~= '1') then
  local pttl = redis.call('PTTL', k.writer)
  if holder == ARGV[1] then
    return {2, pttl}
  end
  return busy(pttl)
end
if not holder then
  prune(k.readers)
  keep(k.readers, k.readers)
  local first = redis.call('ZRANGE', k.readers, 0, 0, 'WITHSCORES')
  if #first > 0 then
    return busy(math.max(tonumber(first[2]) - now, 1))
  end
  if redis.call('EXISTS', k.admit) == 1 then
    return busy(math.max(redis.call('PTTL', k.admit), 1))
  end
end
if ARGV[2] == '0' then
  redis.call('SET', k.writer, ARGV[1])
else
  redis.call('SET', k.writer, ARGV[1], 'PX', ARGV[2])
end
redis.call('ZREM', k.waitingWriters, ARGV[1])
keep(k.waitingWriters, k.waitingWriters)
return {0, token(KEYS[8])}
