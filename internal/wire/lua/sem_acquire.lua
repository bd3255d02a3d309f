-- sem_acquire: take one permit of the semaphore when one is free, in one
-- round trip. sem_lib.lua comes first.
--
-- KEYS[1]  holders (lock-sem:{<name>}): sorted set, id -> expiry in ms
-- KEYS[2]  signal list (lock-sem-signal:{<name>})
-- KEYS[3]  size key (lock-sem-size:{<name>})
-- KEYS[4]  optional: fence key (lock-sem-fence:{<name>}), with fencing
-- ARGV[1]  owner id
-- ARGV[2]  expire in milliseconds (> 0: every permit expires)
-- ARGV[3]  "1" when ARGV[1] is the Semaphore's own random id: a holder
--          with it can only be our own earlier try whose reply was lost,
--          and is taken again with a fresh expire; "0" for a given id
-- ARGV[4]  try mode ("1" not woken, "2" behind a BLPOP, "0" alone); the
--          semaphore gives no turns, so all three act alike
-- ARGV[5]  the size: how many may hold at once
-- ARGV[6]  signal expire in milliseconds: holders that expired free their
--          permits here, and their waiters are woken
--
-- Returns a two-element array {status, value}:
--   {0, token} a permit is now ours; token is the fencing token, 0 without
--   {1, ms}    every permit is held; ms until the earliest holder expires
--   {2, ms}    our caller-given id holds a permit already; ms it has left
--   {3, size}  the holders use another size: nothing is changed
local size = tonumber(ARGV[5])
local stored = redis.call('GET', KEYS[3])
if stored and tonumber(stored) ~= size then
  return {3, tonumber(stored)}
end
local freed = prune(KEYS[1])
local mine = redis.call('ZSCORE', KEYS[1], ARGV[1])
if mine and ARGV[3] ~= '1' then
  return {2, tonumber(mine) - now}
end
if not mine and redis.call('ZCARD', KEYS[1]) >= size then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  keep(KEYS[1], KEYS[3])
  return {1, math.max(tonumber(first[2]) - now, 1)}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('SET', KEYS[3], ARGV[5])
keep(KEYS[1], KEYS[3])
trim(KEYS[1], KEYS[2], size)
if freed > 0 then
  -- Expired holders freed more than the permit we took: wake their waiters.
  wake(KEYS[1], KEYS[2], KEYS[3], freed, ARGV[6])
end
local fence = KEYS[4]
if not fence then
  return {0, 0}
end
local token = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local last = tonumber(redis.call('GET', fence) or '0')
if last + 1 > token then
  token = last + 1
end
redis.call('SET', fence, string.format('%.0f', token))
return {0, token}
