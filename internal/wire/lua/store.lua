-- store: store a computed value (cache.GetOrCompute) only while the lock
-- under which it was computed still holds our id, so that a computer that
-- lost its lock never overwrites a newer value, and only where the value
-- key is missing or holds a value of the cache's own format, so that a
-- value another program wrote meanwhile stays.
--
-- KEYS[1]  lock key (lock:get_or_set:<key>)
-- KEYS[2]  the value key
-- ARGV[1]  owner id
-- ARGV[2]  the value to store
-- ARGV[3]  its TTL in milliseconds (> 0)
-- ARGV[4]  the header every value of the cache's format starts with
--
-- A value of the cache's format is the header, then 'v' and at least the
-- 8 bytes of its TTL, or 'n' alone (a cached absence): what cache's read
-- accepts, and nothing else.
--
-- Returns 1 when stored; 0 when the lock no longer holds our id, 2 when
-- the key holds something else (nothing is written either way). A key of
-- another type than a string is an error (WRONGTYPE), and nothing is
-- written.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local old = redis.call('GET', KEYS[2])
if old then
  local h = string.len(ARGV[4])
  local tag = string.sub(old, h + 1, h + 1)
  local ours = string.sub(old, 1, h) == ARGV[4] and
    ((tag == 'v' and string.len(old) >= h + 9) or (tag == 'n' and string.len(old) == h + 1))
  if not ours then
    return 2
  end
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
