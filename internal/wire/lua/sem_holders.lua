-- sem_holders: list the holders of the semaphore with the milliseconds
-- each has left on the server's clock; changes nothing but dropping the
-- expired. sem_lib.lua comes first.
--
-- KEYS[1]  holders
-- KEYS[2]  size key
--
-- Returns {size, id1, ms1, id2, ms2, ...}, earliest expiry first; size is
-- 0 when nobody holds.
prune(KEYS[1])
keep(KEYS[1], KEYS[2])
local out = {tonumber(redis.call('GET', KEYS[2]) or '0')}
local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  out[#out + 1] = all[i]
  out[#out + 1] = tonumber(all[i + 1]) - now
end
return out
