package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/go-redis-lock/redislock"
)

// A contender is one lock library, set up the way its documentation shows.
type contender struct {
	name string
	// worker returns a handle on lock name with its own Redis client, as a
	// separate process would have, built as cc says.
	worker func(cc clientCfg, name string) (worker, error)
}

// clientCfg says how a worker's client is built.
type clientCfg struct {
	addr string
	// sent, when set, counts the commands the client sends (a hook); nil
	// leaves the client without hooks, for workloads that count on the
	// server instead.
	sent *atomic.Int64
	// defaults builds a go-redis client with go-redis's default options
	// (ContextTimeoutEnabled off), as a user who did not read our README
	// would; otherwise ContextTimeoutEnabled is on, as it advises.
	defaults bool
	// oneCore runs the measured window with GOMAXPROCS(1) (uncontended
	// matrix only): no goroutine runs beside the loop on the other core,
	// so the process's CPU per cycle is the work each library does, with
	// no scheduler spinning or core kept awake in it.
	oneCore bool
	// dial, when set, replaces the client's dialer (the no-server table:
	// an in-process replier instead of redis-server).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// withHook returns cc counting into sent, with ContextTimeoutEnabled.
func withHook(addr string, sent *atomic.Int64) clientCfg { return clientCfg{addr: addr, sent: sent} }

// configName names the client configuration in reports.
func (cc clientCfg) configName() string {
	name := "ContextTimeoutEnabled"
	if cc.defaults {
		name = "defaults"
	}
	if cc.oneCore {
		name += ", one core"
	}
	return name
}

// A worker takes and releases one lock. lock blocks until the lock is held
// or ctx ends.
type worker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
	close()
}

// counting is a go-redis hook that counts the commands a client sends,
// leaving out connection set-up (HELLO, CLIENT SETINFO, ...).
type counting struct{ n *atomic.Int64 }

func (h counting) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h counting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h counting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

func goredisClient(cc clientCfg) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: cc.addr, ContextTimeoutEnabled: !cc.defaults, Dialer: cc.dial})
	if cc.sent != nil {
		c.AddHook(counting{cc.sent})
	}
	return c
}

const benchTTL = 10 * time.Second

var contenders = []contender{
	{"go-redis-lock", func(cc clientCfg, name string) (worker, error) {
		c := goredisClient(cc)
		l, err := redislock.New(c, name, redislock.WithExpire(benchTTL))
		return ourWorker{l, c}, err
	}},
	{"bsm/redislock 100ms linear", bsmWorker(bsm.LinearBackoff(100 * time.Millisecond))},
	{"bsm/redislock 1ms linear", bsmWorker(bsm.LinearBackoff(time.Millisecond))},
	{"redsync defaults", redsyncWorker()},
	{"redsync 1ms retry", redsyncWorker(redsync.WithRetryDelay(time.Millisecond))},
	{"rueidislock defaults", rueidisWorker},
}

type ourWorker struct {
	l *redislock.Lock
	c *redis.Client
}

func (w ourWorker) lock(ctx context.Context) error   { return w.l.Acquire(ctx) }
func (w ourWorker) unlock(ctx context.Context) error { return w.l.Release(ctx) }
func (w ourWorker) close()                           { w.c.Close() }

type bsmW struct {
	locker *bsm.Client
	c      *redis.Client
	name   string
	retry  bsm.RetryStrategy
	held   *bsm.Lock
}

func bsmWorker(retry bsm.RetryStrategy) func(cc clientCfg, name string) (worker, error) {
	return func(cc clientCfg, name string) (worker, error) {
		c := goredisClient(cc)
		return &bsmW{locker: bsm.New(c), c: c, name: name, retry: retry}, nil
	}
}

func (w *bsmW) lock(ctx context.Context) error {
	l, err := w.locker.Obtain(ctx, w.name, benchTTL, &bsm.Options{RetryStrategy: w.retry})
	w.held = l
	return err
}
func (w *bsmW) unlock(ctx context.Context) error { return w.held.Release(ctx) }
func (w *bsmW) close()                           { w.c.Close() }

type redsyncW struct {
	m *redsync.Mutex
	c *redis.Client
}

func redsyncWorker(opts ...redsync.Option) func(cc clientCfg, name string) (worker, error) {
	return func(cc clientCfg, name string) (worker, error) {
		c := goredisClient(cc)
		rs := redsync.New(redsyncgoredis.NewPool(c))
		return redsyncW{rs.NewMutex(name, append([]redsync.Option{redsync.WithExpiry(benchTTL)}, opts...)...), c}, nil
	}
}

// lock retries redsync's ErrFailed (its tries ran out) until ctx ends, as
// a caller that must get the lock would.
func (w redsyncW) lock(ctx context.Context) error {
	for {
		err := w.m.LockContext(ctx)
		var taken *redsync.ErrTaken
		if err == nil || ctx.Err() != nil || !(errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken)) {
			return err
		}
	}
}
func (w redsyncW) unlock(ctx context.Context) error {
	_, err := w.m.UnlockContext(ctx)
	return err
}
func (w redsyncW) close() { w.c.Close() }

// rueidisCounting counts the commands a rueidis client sends.
type rueidisCounting struct {
	rueidis.Client
	n *atomic.Int64
}

func (c rueidisCounting) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}
func (c rueidisCounting) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(int64(len(cmds)))
	return c.Client.DoMulti(ctx, cmds...)
}
func (c rueidisCounting) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.DoCache(ctx, cmd, ttl)
}
func (c rueidisCounting) DoMultiCache(ctx context.Context, cmds ...rueidis.CacheableTTL) []rueidis.RedisResult {
	c.n.Add(int64(len(cmds)))
	return c.Client.DoMultiCache(ctx, cmds...)
}

type rueidisW struct {
	locker rueidislock.Locker
	name   string
	cancel context.CancelFunc
}

// rueidisWorker: rueidis has no ContextTimeoutEnabled (it always honours
// contexts), so both client configurations build the same client.
func rueidisWorker(cc clientCfg, name string) (worker, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{cc.addr}},
		ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
			c, err := rueidis.NewClient(o)
			if err != nil {
				return nil, err
			}
			if cc.sent == nil {
				return c, nil
			}
			return rueidisCounting{c, cc.sent}, nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("rueidislock: %w", err)
	}
	return &rueidisW{locker: l, name: name}, nil
}

func (w *rueidisW) lock(ctx context.Context) error {
	_, cancel, err := w.locker.WithContext(ctx, w.name)
	w.cancel = cancel
	return err
}
func (w *rueidisW) unlock(context.Context) error { w.cancel(); return nil }
func (w *rueidisW) close()                       { w.locker.Close() }
