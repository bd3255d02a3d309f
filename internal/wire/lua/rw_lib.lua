-- rw_lib: prepended, after sem_lib.lua, to every RWMutex script (see
-- scripts.lua.go).
--
-- An RWMutex's keys: the writer key (a string holding the writer's id, with
-- an expire, as the Lock's key), the readers (a sorted set of ids scored
-- by their expiry on this server's clock, as a semaphore's holders), the
-- waiting writers and the waiting readers (sorted sets of ids scored by
-- when their registration lapses: each try that finds the mutex busy
-- registers its caller again), a signal list for writers and one for
-- readers, and the admitted readers: the waiting readers as a writer
-- released, moved there by its release; while any of them has not come
-- in (and at most as long as a waiting registration lasts), no writer
-- may. A waiting reader is
-- registered by its local queue's token, which stands for every reader
-- waiting in that queue (one process, one client: only its head waits in
-- Redis), and is taken back when the queue empties (rw_rleave.lua).

-- signal pushes n signals onto the list, after dropping what was there.
local function signal(list, n, signalExpire)
  redis.call('DEL', list)
  for _ = 1, n do
    redis.call('LPUSH', list, 1)
  end
  if n > 0 then
    redis.call('PEXPIRE', list, signalExpire)
  end
end

-- register records the caller as waiting until ms from now, and keeps the
-- set alive as long as its latest registration.
local function register(set, id, ms)
  redis.call('ZADD', set, now + tonumber(ms), id)
  keep(set, set)
end

-- handoff runs when the writer key has been freed: the readers that wait
-- go first, all of them (they become the admitted readers, who hold
-- writers back until they are in, or admitMS has passed); with no reader
-- waiting, one writer is woken, as the Lock's release wakes one waiter.
local function handoff(k, signalExpire, admitMS)
  prune(k.waitingReaders)
  local n = redis.call('ZCARD', k.waitingReaders)
  if n > 0 then
    signal(k.readerSignal, n, signalExpire)
    redis.call('RENAME', k.waitingReaders, k.admit)
    redis.call('PEXPIRE', k.admit, admitMS)
    prune(k.waitingWriters)
    if redis.call('ZCARD', k.waitingWriters) > 0 then
      -- A waiting writer tries again now, and then waits no longer than
      -- the admitted readers may hold it back.
      signal(k.writerSignal, 1, signalExpire)
    end
  else
    signal(k.writerSignal, 1, signalExpire)
  end
end

-- lastReaderOut runs after a reader left: when none is left and a writer
-- waits, one writer is woken.
local function lastReaderOut(k, signalExpire)
  prune(k.readers)
  keep(k.readers, k.readers)
  prune(k.waitingWriters)
  if redis.call('ZCARD', k.readers) == 0 and redis.call('ZCARD', k.waitingWriters) > 0 then
    signal(k.writerSignal, 1, signalExpire)
  end
end

-- token returns a new fencing token from the fence key (see acquire.lua).
local function token(fence)
  if not fence then
    return 0
  end
  local t = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
  local last = tonumber(redis.call('GET', fence) or '0')
  if last + 1 > t then
    t = last + 1
  end
  redis.call('SET', fence, string.format('%.0f', t))
  return t
end
