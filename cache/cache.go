// Package cache computes a missing value once across every process: the Go
// form of python-redis-lock's locked_get_or_set, on the locks of package
// redislock.
//
// A miss takes the lock "get_or_set:<key>" (python-redis-lock's name for
// it), reads the key again, calls the compute function and stores its
// value; every other caller waits on the lock's signal, never polling, and
// reads the value when the computer releases.
//
// What is shared with python-redis-lock is the lock, not the value: a Go
// and a Python filler of one key never compute at the same time, but each
// stores its value in its own format under its own key (Django pickles it
// under ":1:<key>"), so each language computes its own value once. Values
// are stored with a header of this package's own; a key holding anything
// else is never returned nor overwritten (ErrForeignValue).
package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// A Cache computes each missing value once across every process that uses
// the same Redis. It is safe for concurrent use and holds no connection of
// its own. With WithStaleAfter it starts refresh goroutines; Close waits
// for them.
type Cache struct {
	client redis.UniversalClient
	cfg    config

	flights flightGroup // one read-or-compute per key in this process

	mu         sync.Mutex
	refreshing map[string]bool      // keys with a refresh goroutine of ours
	notBefore  map[string]time.Time // no refresh of the key from here before then
	closed     bool
	wg         sync.WaitGroup
	stop       context.CancelFunc // cancels refresh goroutines (Close)
	stopCtx    context.Context
}

// Result says where GetOrCompute's value came from.
type Result int

const (
	// Hit: the value was in Redis.
	Hit Result = iota + 1
	// Computed: this call computed and stored it.
	Computed
	// Shared: another caller computed it while this one waited (in this
	// process or another).
	Shared
	// Stale: the value is past its soft TTL (WithStaleAfter); it was
	// returned at once and one refresh runs in the background.
	Stale
)

func (r Result) String() string {
	switch r {
	case Hit:
		return "hit"
	case Computed:
		return "computed"
	case Shared:
		return "shared"
	case Stale:
		return "stale"
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

var (
	// ErrNoValue is what a compute function returns to say that the value
	// does not exist. GetOrCompute returns it (wrapped); with
	// WithNegativeTTL the absence is cached, and later calls return
	// ErrNoValue without computing until that TTL runs out.
	ErrNoValue = errors.New("cache: no such value")

	// ErrForeignValue is returned by GetOrCompute when the value key holds
	// something this package did not store (another program wrote it,
	// before the call or while fn ran): it is neither returned nor
	// overwritten.
	ErrForeignValue = errors.New("cache: the key holds a value GetOrCompute did not store")

	// ErrComputePanicked is returned to the callers of GetOrCompute that
	// shared a call whose compute function panicked (the panic goes on up
	// in the caller that ran it).
	ErrComputePanicked = errors.New("cache: the compute this call shared panicked")

	// ErrClosed is returned by GetOrCompute after Close.
	ErrClosed = errors.New("cache: closed")
)

// An Option configures New.
type Option func(*config)

type config struct {
	lockOpts       []redislock.Option
	negativeTTL    time.Duration
	staleAfter     time.Duration
	jitter         float64
	refreshTimeout time.Duration
}

// DefaultRefreshTimeout bounds a background refresh (WithStaleAfter).
const DefaultRefreshTimeout = 30 * time.Second

// storeTimeout bounds the store of a computed value, which runs even when
// the caller's context ended after fn returned: the callers waiting for
// the value would otherwise compute it again.
const storeTimeout = 5 * time.Second

// WithLockOptions adds options of the lock taken on a miss (see
// redislock.New): WithKeyPrefix, WithExpire, WithFencing, WithReplicaAck,
// WithLogger... The lock's defaults are redislock.New's: a 30 s expire,
// renewed while the compute runs.
func WithLockOptions(opts ...redislock.Option) Option {
	return func(c *config) { c.lockOpts = append(c.lockOpts, opts...) }
}

// WithNegativeTTL caches a compute's ErrNoValue for d. The default, 0,
// caches nothing: the next call computes again.
func WithNegativeTTL(d time.Duration) Option {
	return func(c *config) { c.negativeTTL = d }
}

// WithStaleAfter turns on stale-while-revalidate: a value older than d
// (its soft TTL, shorter than the hard TTL given to GetOrCompute, which
// refuses one that is not) is returned at once as Stale, and one caller in
// all processes (the one whose try of the lock wins) refreshes it on a
// goroutine of its own, whose fn's context ends after WithRefreshTimeout.
// A process whose try lost, or whose refresh failed, tries again only
// after a pause (a quarter of d, from 50 ms to 5 s), however many stale
// reads come meanwhile. A panic in fn during a refresh ends that refresh
// only (it is recovered: nobody else could). Ages are read from the key's
// TTL on the server, never from a client's clock. The default, 0, is off:
// a value is fresh until its hard TTL removes it.
func WithStaleAfter(d time.Duration) Option {
	return func(c *config) { c.staleAfter = d }
}

// WithTTLJitter stores each value for its TTL times a random factor in
// [1, 1+f), so that values computed together do not all expire together.
// The default is 0: no jitter. f must be in [0, 1].
func WithTTLJitter(f float64) Option {
	return func(c *config) { c.jitter = f }
}

// WithRefreshTimeout bounds each background refresh (WithStaleAfter): its
// compute function's context ends after d, and the refresh gives up. The
// default is DefaultRefreshTimeout.
func WithRefreshTimeout(d time.Duration) Option {
	return func(c *config) { c.refreshTimeout = d }
}

// New returns a Cache on client. It sends nothing. A bad option is an
// error matching redislock.ErrInvalidArgument, a nil client
// redislock.ErrNilClient; on a *redis.ClusterClient it returns
// redislock.ErrUnsupportedClient: the value key and the lock key are in
// different slots, and the store must check both in one script.
func New(client redis.UniversalClient, opts ...Option) (*Cache, error) {
	c := config{refreshTimeout: DefaultRefreshTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if _, err := redislock.New(client, LockName("x"), c.lockOpts...); err != nil {
		return nil, fmt.Errorf("cache: %w", err) // the client, or a lock option
	}
	if _, ok := client.(*redis.ClusterClient); ok {
		return nil, fmt.Errorf("cache: %w (a value and its lock are in different slots)", redislock.ErrUnsupportedClient)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("cache: %w: %s", redislock.ErrInvalidArgument, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{client: client, cfg: c, refreshing: map[string]bool{}, notBefore: map[string]time.Time{}, stop: cancel, stopCtx: ctx}, nil
}

// check says what is wrong with c, if anything.
func (c config) check() error {
	switch {
	case c.negativeTTL < 0:
		return fmt.Errorf("WithNegativeTTL(%v): must not be negative", c.negativeTTL)
	case c.staleAfter < 0:
		return fmt.Errorf("WithStaleAfter(%v): must not be negative", c.staleAfter)
	case c.refreshTimeout <= 0:
		return fmt.Errorf("WithRefreshTimeout(%v): must be positive", c.refreshTimeout)
	case !(c.jitter >= 0 && c.jitter <= 1): // NaN too
		return fmt.Errorf("WithTTLJitter(%v): must be in [0, 1]", c.jitter)
	}
	return nil
}

// Close cancels the background refreshes and waits for them to end, as
// long as ctx allows. GetOrCompute returns ErrClosed afterwards.
func (c *Cache) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cache: close: %w", ctx.Err())
	}
}

// LockName is the name of the lock a miss of key takes:
// python-redis-lock's "get_or_set:<key>".
func LockName(key string) string { return "get_or_set:" + key }

// GetOrCompute returns the value of key: from Redis when it is there
// (Hit), else computed by fn and stored for ttl (Computed), or computed
// meanwhile by another caller while this one waited for the lock (Shared).
//
// On a miss it takes the lock LockName(key), waiting as Lock.Acquire does
// for as long as ctx allows, then reads key again, and only if it is still
// missing calls fn, with the lock renewed while fn runs. fn's context is
// ctx's, and is also cancelled when the lock is lost (context.Cause
// matches redislock.ErrLost). The value is stored by a script that first
// checks that the lock still holds this caller's id and that the key is
// missing or holds a value of this package: a compute that lost its lock
// stores nothing and returns an error matching redislock.ErrLost, so a
// late computer never overwrites a newer value, and a value another
// program wrote meanwhile stays (ErrForeignValue). A value fn returned is
// stored even when ctx ended after fn returned (the store has a timeout
// of its own), so the callers waiting for it do not compute it again.
//
// fn's error is returned, wrapped, and nothing is stored; the lock is
// released, which wakes one waiting caller, who computes next (the others
// keep waiting for its result). An fn returning ErrNoValue is cached for
// WithNegativeTTL when set. In one process, concurrent calls for one key
// share a single read-or-compute: the others get its value (Shared when
// it was computed) or its error.
//
// It returns an error matching redislock.ErrInvalidArgument, sending
// nothing, for an empty key, a ttl below 1 ms or not longer than
// WithStaleAfter, or a nil fn; redislock.ErrLocked with ctx's error when
// ctx ends while waiting; ErrForeignValue when the key holds a value it
// did not store; ErrComputePanicked to the callers that shared a compute
// that panicked; Redis errors wrapped. A function that returns a nil
// slice stores, and returns, an empty one.
func (c *Cache) GetOrCompute(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) ([]byte, error)) ([]byte, Result, error) {
	if err := c.checkCall(key, ttl, fn != nil); err != nil {
		return nil, 0, err
	}
	for {
		v, res, err, shared, leaderGaveUp := c.flights.do(ctx, key, func() ([]byte, Result, error) {
			return c.getOrCompute(ctx, key, ttl, fn)
		})
		if !shared {
			return v, res, err
		}
		if leaderGaveUp && ctx.Err() == nil {
			continue // the call we shared ended with its caller's context: ours goes on
		}
		if res == Computed {
			res = Shared
		}
		return v, res, err
	}
}

// checkCall says what is wrong with a call's arguments, if anything, or
// that c is closed.
func (c *Cache) checkCall(key string, ttl time.Duration, hasFn bool) error {
	var what string
	switch {
	case key == "":
		what = "the key is empty"
	case ttl < time.Millisecond:
		what = fmt.Sprintf("the TTL %v is below 1ms", ttl)
	case !hasFn:
		what = "the function is nil"
	case c.cfg.staleAfter > 0 && ttl <= c.cfg.staleAfter:
		what = fmt.Sprintf("the TTL %v is not longer than WithStaleAfter's %v", ttl, c.cfg.staleAfter)
	}
	if what != "" {
		return fmt.Errorf("cache %q: %w: %s", key, redislock.ErrInvalidArgument, what)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("cache %q: %w", key, ErrClosed)
	}
	return nil
}

func (c *Cache) getOrCompute(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) ([]byte, error)) ([]byte, Result, error) {
	e, err := c.read(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("cache %q: read: %w", key, err)
	}
	if e.found {
		if c.cfg.staleAfter > 0 && !e.absent && e.age >= c.cfg.staleAfter {
			c.refresh(key, ttl, fn)
			return e.value, Stale, nil
		}
		return e.answer(key, Hit)
	}
	l, err := redislock.New(c.client, LockName(key), c.cfg.lockOpts...)
	if err != nil {
		return nil, 0, fmt.Errorf("cache %q: %w", key, err)
	}
	cp := &compute{c: c, l: l, key: key, ttl: ttl, fn: fn}
	err = l.TryDo(ctx, cp.run)
	if !cp.ran && errors.Is(err, redislock.ErrLocked) && ctx.Err() == nil {
		cp.waited = true
		err = l.Do(ctx, cp.run)
		if !cp.ran && err != nil {
			// An Acquire given up while it waited finishes its wait in the
			// background (see Lock.Settle); Close waits for it.
			c.settle(l)
		}
	}
	return cp.result(err)
}

// settle waits, on a goroutine Close waits for, for the work l still
// runs in the background.
func (c *Cache) settle(l *redislock.Lock) {
	run := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Settle(ctx)
	}
	c.mu.Lock()
	if c.closed { // Close is waiting, or done: no goroutine it would miss
		c.mu.Unlock()
		run()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		run()
	}()
}
