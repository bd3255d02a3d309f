-- sem_lib: prepended to every semaphore script (see scripts.lua.go).
--
-- A semaphore's holders are a sorted set of owner ids, each scored by its
-- expiry in milliseconds of this server's clock (TIME), never a client's;
-- every script first drops the holders whose expiry has passed, so a
-- crashed holder frees its permit at its own TTL. The size every holder
-- agreed on is kept in the size key beside it; both live as long as the
-- latest holder and are deleted with the last one.
if redis.replicate_commands then redis.replicate_commands() end -- effects replication before TIME (a no-op since Redis 7)
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

-- prune drops the holders that expired and returns how many.
local function prune(holders)
  return redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
end

-- keep makes the holders and size keys live as long as the latest holder,
-- or deletes both when no holder is left.
local function keep(holders, sizeKey)
  local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', holders, sizeKey)
    return
  end
  redis.call('PEXPIREAT', holders, last[2])
  redis.call('PEXPIREAT', sizeKey, last[2])
end

-- wake pushes one signal for each of the freed permits, but never more
-- than the free permits that have no signal yet: the list never holds
-- more signals than waiters can use. Returns how many it pushed.
local function wake(holders, signal, sizeKey, freed, signalExpire)
  local size = tonumber(redis.call('GET', sizeKey) or '0')
  if size == 0 and redis.call('EXISTS', holders) == 0 then
    -- keep deleted the size with the last holder: every permit is free,
    -- one at least (a giveback after the last release would push nothing)
    size = 1
  end
  local n = math.min(freed, size - redis.call('ZCARD', holders) - redis.call('LLEN', signal))
  for _ = 1, n do
    redis.call('LPUSH', signal, 1)
  end
  if n > 0 then
    redis.call('PEXPIRE', signal, signalExpire)
  end
  return math.max(n, 0)
end

-- trim keeps no more signals than free permits, after an acquire.
local function trim(holders, signal, size)
  local free = size - redis.call('ZCARD', holders)
  if free <= 0 then
    redis.call('DEL', signal)
  else
    redis.call('LTRIM', signal, 0, free - 1)
  end
end
