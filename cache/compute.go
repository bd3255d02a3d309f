package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// A compute is one read-compute-store of key under the lock l.
type compute struct {
	c      *Cache
	l      *redislock.Lock
	key    string
	ttl    time.Duration
	fn     func(ctx context.Context) ([]byte, error)
	waited bool // the lock was waited for: a value found then is Shared

	ran bool // run was called: the lock was acquired
	res Result
	got entry
}

// run is the work done under the lock: it reads key again, and computes
// and stores it if it is still missing (or stale).
func (cp *compute) run(ctx context.Context) error {
	cp.ran = true
	c := cp.c
	e, err := c.read(ctx, cp.key)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if e.found && (c.cfg.staleAfter == 0 || e.age < c.cfg.staleAfter) {
		cp.got, cp.res = e, Hit
		if cp.waited {
			cp.res = Shared
		}
		return nil
	}
	v, ferr := cp.fn(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, redislock.ErrLost) {
		return cause // whatever fn returned: it is not ours to store
	}
	stored, storeTTL, e, err := c.toStore(v, ferr, cp.ttl)
	if err != nil {
		return err
	}
	// The value is stored even if ctx has ended since fn returned: the
	// script checks that the lock is still ours.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	n, err := wire.Store.Run(sctx, c.client, []string{cp.l.Key(), cp.key},
		cp.l.ID(), stored, strconv.FormatInt(max(storeTTL.Milliseconds(), 1), 10), storedHeader).Int()
	switch {
	case err != nil:
		return fmt.Errorf("store: %w", err)
	case n == 0:
		return fmt.Errorf("store: %w: %w", redislock.ErrLost, redislock.ErrTakenOver)
	case n == 2:
		return fmt.Errorf("store: %w", ErrForeignValue)
	}
	cp.got, cp.res = e, Computed
	return nil
}

// result is GetOrCompute's answer after Do or TryDo returned err.
func (cp *compute) result(err error) ([]byte, Result, error) {
	if err != nil && cp.res == Computed {
		// Stored while the lock held our id: a loss, or a failed release,
		// after that takes nothing from the value.
		err = nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("cache %q: %w", cp.key, err)
	}
	return cp.got.answer(cp.key, cp.res)
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
