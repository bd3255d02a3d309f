-- sem_extend: set our permit's expiry to ARGV[2] ms from now on the
-- server's clock, if we still hold it. Used by Extend and auto-renewal.
-- sem_lib.lua comes first.
--
-- KEYS[1]  holders
-- KEYS[2]  size key
-- ARGV[1]  owner id
-- ARGV[2]  new expire in milliseconds (> 0)
--
-- Returns 0 when extended; 1 when our id holds no permit (it expired on
-- the server's clock, or was reset). A permit is never recreated.
prune(KEYS[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  keep(KEYS[1], KEYS[2])
  return 1
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
keep(KEYS[1], KEYS[2])
return 0
