package redistest

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// PyLock plays a python-redis-lock 4.x Lock(redis, name, expire=Expire,
// id=ID). python-redis-lock cannot be installed here: PyLock replays what
// it sends, command for command and script effect for script effect.
type PyLock struct {
	C      *redis.Client
	Name   string
	ID     string
	Expire int // whole seconds: python-redis-lock truncates with int()
}

// Key is the lock's key, "lock:<name>".
func (p PyLock) Key() string { return "lock:" + p.Name }

// Signal is the lock's signal list, "lock-signal:<name>".
func (p PyLock) Signal() string { return "lock-signal:" + p.Name }

// Acquire is python-redis-lock's acquire(blocking, timeout): SET NX EX;
// when busy and blocking, BLPOP the signal list for timeout (or the
// expire; whole seconds), then SET NX again in a second round trip; after
// a BLPOP that timed out with a timeout given, one last SET NX.
func (p PyLock) Acquire(ctx context.Context, blocking bool, timeout int) bool {
	blpop := timeout
	if blpop == 0 {
		blpop = p.Expire
	}
	timedOut := false
	for {
		if p.C.SetNX(ctx, p.Key(), p.ID, time.Duration(p.Expire)*time.Second).Val() {
			return true
		}
		if !blocking || timedOut {
			return false
		}
		err := p.C.BLPop(ctx, time.Duration(blpop)*time.Second, p.Signal()).Err()
		timedOut = errors.Is(err, redis.Nil) && timeout > 0
	}
}

// Scripts with the effects of python-redis-lock's extend, release and
// reset_all.
var (
	pyExtend = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 1 end
if redis.call('TTL', KEYS[1]) < 0 then return 2 end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 0`)
	pyRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 1 end
redis.call('DEL', KEYS[2])
redis.call('LPUSH', KEYS[2], 1)
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[1])
return 0`)
	pyResetAll = redis.NewScript(`
local locks = redis.call('KEYS', 'lock:*')
for _, lock in ipairs(locks) do
  local signal = 'lock-signal:' .. string.sub(lock, 6)
  redis.call('DEL', signal)
  redis.call('LPUSH', signal, 1)
  redis.call('EXPIRE', signal, 1)
  redis.call('DEL', lock)
end
return #locks`)
)

// Extend is python-redis-lock's extend(expire): 0 done, 1 not ours, 2 no
// expire on the key.
func (p PyLock) Extend(ctx context.Context, expire int) int64 {
	return pyExtend.Run(ctx, p.C, []string{p.Key()}, p.ID, expire).Val().(int64)
}

// Release is python-redis-lock's release(): 0 done, 1 not ours.
func (p PyLock) Release(ctx context.Context) int64 {
	return pyRelease.Run(ctx, p.C, []string{p.Key(), p.Signal()}, p.ID, 1000).Val().(int64)
}

// PyResetAll is python-redis-lock's reset_all(redis): it returns how many
// locks it deleted.
func PyResetAll(ctx context.Context, c *redis.Client) int64 {
	return pyResetAll.Run(ctx, c, nil).Val().(int64)
}
