-- store: store a computed value (Cache.GetOrCompute) only while the lock
-- under which it was computed still holds our id, so that a computer that
-- lost its lock never overwrites a newer value.
--
-- KEYS[1]  lock key (lock:get_or_set:<key>)
-- KEYS[2]  the value key
-- ARGV[1]  owner id
-- ARGV[2]  the value to store
-- ARGV[3]  its TTL in milliseconds (> 0)
--
-- Returns 1 when stored; 0 when the lock no longer holds our id (nothing
-- is written).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
