-- rw_info: who holds the RWMutex, and who waits; changes nothing but
-- dropping what expired. sem_lib.lua and rw_lib.lua come first.
--
-- KEYS     as rw_wacquire.lua's (no fence key)
--
-- Returns {writer id or "", writer pttl (-2: none, -1: no expire),
-- waiting writers, waiting readers, admitted readers still to come in,
-- reader id 1, ms left 1, ...}.
local k = {writer = KEYS[1], readers = KEYS[3], waitingWriters = KEYS[4], waitingReaders = KEYS[6],
  admit = KEYS[7]}
prune(k.readers)
prune(k.waitingWriters)
prune(k.waitingReaders)
local out = {redis.call('GET', k.writer) or '', redis.call('PTTL', k.writer),
  redis.call('ZCARD', k.waitingWriters), redis.call('ZCARD', k.waitingReaders), redis.call('ZCARD', k.admit)}
local all = redis.call('ZRANGE', k.readers, 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  out[#out + 1] = all[i]
  out[#out + 1] = tonumber(all[i + 1]) - now
end
return out
