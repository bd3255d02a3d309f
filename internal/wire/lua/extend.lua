-- extend: set a new expire on the lock if it holds our id. Used by Extend
-- and by auto-renewal.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  new expire in milliseconds (> 0)
--
-- Returns 0 when extended; 1 when the key is missing (expired or reset);
-- 3 when it holds another id; 2 when it holds our id but has no expire
-- (it is never given one). A missing key is never recreated.
local holder = redis.call('GET', KEYS[1])
if not holder then
  return 1
end
if holder ~= ARGV[1] then
  return 3
end
if redis.call('PTTL', KEYS[1]) < 0 then
  return 2
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0
