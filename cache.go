package redislock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/hold"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// A Cache computes a missing value once across every process: the Go form
// of python-redis-lock's locked_get_or_set. A miss takes the lock
// "get_or_set:<key>" (python-redis-lock's name for it, under the lock
// prefix, so that Python and Go fillers of one key exclude each other),
// reads the key again, calls the compute function and stores its value;
// every other caller waits on the lock's signal, never polling, and reads
// the value when the computer releases. See GetOrCompute.
//
// A Cache is safe for concurrent use and holds no connection of its own.
// With WithStaleAfter it starts refresh goroutines; Close waits for them.
type Cache struct {
	client redis.UniversalClient
	cfg    cacheConfig

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
	// CacheHit: the value was in Redis.
	CacheHit Result = iota + 1
	// CacheComputed: this call computed and stored it.
	CacheComputed
	// CacheShared: another caller computed it while this one waited (in
	// this process or another).
	CacheShared
	// CacheStale: the value is past its soft TTL (WithStaleAfter); it was
	// returned at once and one refresh runs in the background.
	CacheStale
)

func (r Result) String() string {
	switch r {
	case CacheHit:
		return "hit"
	case CacheComputed:
		return "computed"
	case CacheShared:
		return "shared"
	case CacheStale:
		return "stale"
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

// ErrNoValue is what a compute function returns to say that the value does
// not exist. GetOrCompute returns it (wrapped); with WithNegativeTTL the
// absence is cached, and later calls return ErrNoValue without computing
// until that TTL runs out.
var ErrNoValue = errors.New("redislock: cache: no such value")

// Cache argument errors; each matches ErrInvalidArgument.
var (
	// ErrInvalidCacheOption is returned by NewCache for a negative
	// duration, a jitter outside [0, 1], or lock options New refuses.
	ErrInvalidCacheOption = invalid("cache option: durations must not be negative, jitter must be in [0, 1]")
	// ErrInvalidCacheCall is returned by GetOrCompute for an empty key, a
	// TTL below 1 ms or a nil function, before anything is sent.
	ErrInvalidCacheCall = invalid("cache call: the key must not be empty, the TTL at least 1ms, the function not nil")
	// ErrCacheClosed is returned by GetOrCompute after Close.
	ErrCacheClosed = errors.New("redislock: cache closed")
)

// A CacheOption configures NewCache.
type CacheOption func(*cacheConfig)

type cacheConfig struct {
	lockOpts       []Option
	negativeTTL    time.Duration
	staleAfter     time.Duration
	jitter         float64
	refreshTimeout time.Duration
}

// Defaults of the cache's lock and refresh.
const (
	// DefaultCacheLockExpire is the expire of a cache's lock, renewed while
	// the compute runs, unless WithCacheLockOptions sets another.
	DefaultCacheLockExpire = 10 * time.Second
	// DefaultRefreshTimeout bounds a background refresh (WithStaleAfter).
	DefaultRefreshTimeout = 30 * time.Second
)

// WithCacheLockOptions adds options of the lock taken on a miss (see New):
// WithKeyPrefix, WithExpire, WithFencing, WithReplicaAck, WithLogger...
// The defaults are WithExpire(DefaultCacheLockExpire) and WithAutoRenewal:
// the lock is renewed while the compute runs.
func WithCacheLockOptions(opts ...Option) CacheOption {
	return func(c *cacheConfig) { c.lockOpts = append(c.lockOpts, opts...) }
}

// WithNegativeTTL caches a compute's ErrNoValue for d. The default, 0,
// caches nothing: the next call computes again.
func WithNegativeTTL(d time.Duration) CacheOption {
	return func(c *cacheConfig) { c.negativeTTL = d }
}

// WithStaleAfter turns on stale-while-revalidate: a value older than d
// (its soft TTL, shorter than the hard TTL given to GetOrCompute, which
// refuses one that is not) is returned at once as CacheStale, and one
// caller in all processes (the one whose TryAcquire of the lock wins)
// refreshes it on a goroutine of its own, whose fn's context ends after
// WithRefreshTimeout. A process whose try lost, or whose refresh failed,
// tries again only after a pause (a quarter of d, from 50 ms to 5 s),
// however many stale reads come meanwhile. A panic in fn during a
// refresh ends that refresh only (it is recovered: nobody else could).
// Ages are read from the key's TTL on the server, never from a client's
// clock. The default, 0, is off: a value is fresh until its hard TTL
// removes it.
func WithStaleAfter(d time.Duration) CacheOption {
	return func(c *cacheConfig) { c.staleAfter = d }
}

// WithTTLJitter stores each value for its TTL times a random factor in
// [1, 1+f), so that values computed together do not all expire together.
// The default is 0: no jitter. f must be in [0, 1].
func WithTTLJitter(f float64) CacheOption {
	return func(c *cacheConfig) { c.jitter = f }
}

// WithRefreshTimeout bounds each background refresh (WithStaleAfter): its
// compute function's context ends after d, and the refresh gives up. The
// default is DefaultRefreshTimeout.
func WithRefreshTimeout(d time.Duration) CacheOption {
	return func(c *cacheConfig) { c.refreshTimeout = d }
}

// NewCache returns a Cache on client. It sends nothing; a bad option is
// an error matching ErrInvalidArgument. On a *redis.ClusterClient it
// returns ErrUnsupportedClient: the value key and the lock key are in
// different slots, and the store must check the lock in the same script.
func NewCache(client redis.UniversalClient, opts ...CacheOption) (*Cache, error) {
	if isNil(client) {
		return nil, fmt.Errorf("cache: %w", ErrNilClient)
	}
	if err := checkClient(client); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if _, ok := client.(*redis.ClusterClient); ok {
		return nil, fmt.Errorf("cache: %w (a value and its lock are in different slots)", ErrUnsupportedClient)
	}
	c := cacheConfig{refreshTimeout: DefaultRefreshTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.negativeTTL < 0 || c.staleAfter < 0 || c.refreshTimeout <= 0 || c.jitter < 0 || c.jitter > 1 || c.jitter != c.jitter {
		return nil, fmt.Errorf("cache: %w", ErrInvalidCacheOption)
	}
	c.lockOpts = append([]Option{WithExpire(DefaultCacheLockExpire), WithAutoRenewal()}, c.lockOpts...)
	if _, err := New(client, "get_or_set:x", c.lockOpts...); err != nil {
		return nil, fmt.Errorf("cache: %w: %w", ErrInvalidCacheOption, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{client: client, cfg: c, refreshing: map[string]bool{}, notBefore: map[string]time.Time{}, stop: cancel, stopCtx: ctx}, nil
}

// Close cancels the background refreshes and waits for them to end, as
// long as ctx allows. GetOrCompute returns ErrCacheClosed afterwards.
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
// (CacheHit), else computed by fn and stored for ttl (CacheComputed), or
// computed meanwhile by another caller while this one waited for the lock
// (CacheShared).
//
// On a miss it takes the lock LockName(key), waiting as Acquire does (on
// the lock's signal, never polling) for as long as ctx allows, then reads
// key again, and only if it is still missing calls fn, with the lock
// renewed while fn runs. fn's context is ctx's, and is also cancelled when
// the lock is lost (context.Cause matches ErrLost). The value is stored
// by a script that first checks that the lock still holds this caller's
// id: a compute that lost its lock stores nothing and returns an error
// matching ErrLost, so a late computer never overwrites a newer value.
//
// fn's error is returned, wrapped, and nothing is stored; the lock is
// released, which wakes one waiting caller, who computes next (the others
// keep waiting for its result). An fn returning ErrNoValue is cached for
// WithNegativeTTL when set. In one process, concurrent calls for one key
// share a single read-or-compute: the others get its value (CacheShared
// when it was computed) or its error.
//
// It returns ErrInvalidCacheCall, sending nothing, for an empty key, a
// ttl below 1 ms or not longer than WithStaleAfter, or a nil fn;
// ErrLocked with ctx's error when ctx ends while waiting; ErrForeignValue
// when the key holds a value it did not store (which it leaves alone);
// ErrComputePanicked to the callers that shared a compute that panicked;
// Redis errors wrapped. A function that returns a nil slice stores, and
// returns, an empty one.
func (c *Cache) GetOrCompute(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) ([]byte, error)) ([]byte, Result, error) {
	if key == "" || ttl < time.Millisecond || fn == nil {
		return nil, 0, fmt.Errorf("cache %q: %w", key, ErrInvalidCacheCall)
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, 0, fmt.Errorf("cache %q: %w", key, ErrCacheClosed)
	}
	if c.cfg.staleAfter > 0 && ttl <= c.cfg.staleAfter {
		return nil, 0, fmt.Errorf("cache %q: %w (the TTL %v is not longer than WithStaleAfter's %v)", key, ErrInvalidCacheCall, ttl, c.cfg.staleAfter)
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
		if res == CacheComputed {
			res = CacheShared
		}
		return v, res, err
	}
}

func (c *Cache) getOrCompute(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) ([]byte, error)) ([]byte, Result, error) {
	e, err := c.read(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("cache %q: read: %w", key, err)
	}
	if e.found {
		if c.cfg.staleAfter > 0 && !e.absent && e.age >= c.cfg.staleAfter {
			c.refresh(key, ttl, fn)
			return e.value, CacheStale, nil
		}
		return e.answer(key, CacheHit)
	}
	l, err := New(c.client, LockName(key), c.cfg.lockOpts...)
	if err != nil {
		return nil, 0, fmt.Errorf("cache %q: %w", key, err)
	}
	waited := false
	h, err := l.run(ctx, false)
	if errors.Is(err, ErrLocked) && ctx.Err() == nil {
		waited = true
		h, err = l.run(ctx, true)
	}
	if err != nil {
		if waited {
			// An Acquire given up while it waited finishes its wait in the
			// background (see Lock.Settle); Close waits for it.
			c.settle(l)
		}
		return nil, 0, fmt.Errorf("cache %q: %w", key, err)
	}
	return c.computeHeld(ctx, l, h, key, ttl, fn, waited)
}

// settle waits, on a goroutine Close waits for, for the work l still
// runs in the background.
func (c *Cache) settle(l *Lock) {
	run := func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout+time.Second)
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

// computeHeld runs under hold h of l: it reads key again, and computes and
// stores it if it is still missing.
func (c *Cache) computeHeld(ctx context.Context, l *Lock, h *hold.Hold, key string, ttl time.Duration, fn func(ctx context.Context) ([]byte, error), waited bool) ([]byte, Result, error) {
	var (
		res Result
		got entry
	)
	err := l.runHeld(ctx, h, func(fctx context.Context) error {
		e, err := c.read(fctx, key)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if e.found && (c.cfg.staleAfter == 0 || e.age < c.cfg.staleAfter) {
			got, res = e, CacheHit
			if waited {
				res = CacheShared
			}
			return nil
		}
		v, ferr := fn(fctx)
		if cause := context.Cause(fctx); errors.Is(cause, ErrLost) {
			return cause // whatever fn returned: it is not ours to store
		}
		stored, storeTTL, e, err := c.toStore(v, ferr, ttl)
		if err != nil {
			return err
		}
		got = e
		ok, err := wire.Store.Run(fctx, c.client, []string{l.keys[0], key},
			h.ID(), stored, strconv.FormatInt(max(storeTTL.Milliseconds(), 1), 10)).Int()
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if ok != 1 {
			return fmt.Errorf("store: %w: %w", ErrLost, ErrTakenOver)
		}
		res = CacheComputed
		return nil
	})
	if err != nil && res == CacheComputed {
		// Stored while the lock held our id: a loss, or a failed release,
		// after that takes nothing from the value.
		err = nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("cache %q: %w", key, err)
	}
	return got.answer(key, res)
}

// toStore returns what a computation's value v (or error ferr) stores,
// for how long (ttl, jittered), and what the caller gets: ErrNoValue
// stores an absent value for the negative TTL, when there is one; any
// other error stores nothing and is returned.
func (c *Cache) toStore(v []byte, ferr error, ttl time.Duration) ([]byte, time.Duration, entry, error) {
	switch {
	case errors.Is(ferr, ErrNoValue) && c.cfg.negativeTTL > 0:
		return encodeAbsent(), c.cfg.negativeTTL, entry{found: true, absent: true}, nil
	case ferr != nil:
		return nil, 0, entry{}, ferr
	}
	storeTTL := ttl
	if c.cfg.jitter > 0 {
		// In floats, but kept a second clear of the largest Duration
		// (floats round, and an overflow would wrap).
		extra := rand.Float64() * c.cfg.jitter * float64(ttl)
		if limit := math.MaxInt64 - time.Second - storeTTL; limit <= 0 || extra >= float64(limit) {
			storeTTL = math.MaxInt64 - time.Second
		} else {
			storeTTL += time.Duration(extra)
		}
	}
	if v == nil {
		v = []byte{} // as a hit returns it
	}
	return encodeValue(v, storeTTL), storeTTL, entry{found: true, value: v}, nil
}

// ErrComputePanicked is returned to the callers of GetOrCompute that
// shared a call whose compute function panicked (the panic goes on up in
// the caller that ran it).
var ErrComputePanicked = errors.New("redislock: cache: the compute this call shared panicked")
