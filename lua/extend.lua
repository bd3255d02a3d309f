-- extend: set a new expire on the lock if it holds our id.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  new expire in milliseconds (> 0)
--
-- Returns 0 when extended, 1 when the key is missing or holds another id,
-- 2 when the key has no expire (it is never given one). A missing key is
-- never recreated.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 1
end
if redis.call('PTTL', KEYS[1]) < 0 then
  return 2
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0
