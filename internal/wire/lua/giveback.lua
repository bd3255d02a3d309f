-- giveback: undo what an acquire attempt may have done when its reply was
-- lost (a transport error or an ended context after the command was sent).
-- It is run once, on a fresh connection, and makes sure that neither an
-- orphaned lock nor a consumed wake-up signal is left behind.
--
-- KEYS[1]  lock key
-- KEYS[2]  signal key
-- KEYS[3]  turn key (see release.lua)
-- ARGV[1]  owner id
-- ARGV[2]  signal expire in milliseconds
-- ARGV[3]  "1" when the id is this Lock's own random id, so a key holding it
--          can only be ours and may be released; "0" for a caller-given id
--          that other Lock values may share
-- ARGV[4]  the turn, in milliseconds
--
-- Returns 1 when our lock was released, 2 when the lock was free and a
-- signal was pushed for the next waiter, 0 when another owner holds the
-- lock (its release will wake the next waiter).
local holder = redis.call('GET', KEYS[1])
if holder and (holder ~= ARGV[1] or ARGV[3] ~= '1') then
  return 0
end
redis.call('DEL', KEYS[2])
redis.call('LPUSH', KEYS[2], 1)
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
if holder then
  redis.call('DEL', KEYS[1])
  return 1
end
return 2
