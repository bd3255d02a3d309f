package cache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-redis-lock/redislock"
)

// refresh starts, unless this process already runs one for key or tried
// within refreshPause, a goroutine that takes the lock without waiting
// and, if it wins, recomputes key. Its fn's context ends after
// WithRefreshTimeout, or at Close, which waits for the goroutine (an fn
// that ignores its context keeps it, and Close, waiting).
func (c *Cache) refresh(key string, ttl time.Duration, fn func(ctx context.Context) ([]byte, error)) {
	c.mu.Lock()
	if nb, ok := c.notBefore[key]; ok && !time.Now().Before(nb) {
		delete(c.notBefore, key) // its pause is over
	}
	if c.closed || c.refreshing[key] || time.Now().Before(c.notBefore[key]) {
		c.mu.Unlock()
		return
	}
	c.refreshing[key] = true
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		refreshed := false
		defer func() {
			// A panicking fn ends this refresh only: the caller that
			// started it has its value already, and no one could recover
			// a panic on this goroutine.
			_ = recover()
			c.mu.Lock()
			delete(c.refreshing, key)
			if refreshed {
				delete(c.notBefore, key)
			} else {
				// Another process refreshes it, or this one failed: no
				// new attempt from here for a pause, whatever the reads.
				c.notBefore[key] = time.Now().Add(c.refreshPause())
			}
			c.mu.Unlock()
			c.wg.Done()
		}()
		ctx, cancel := context.WithTimeout(c.stopCtx, c.cfg.refreshTimeout)
		defer cancel()
		l, err := redislock.New(c.client, LockName(key), c.cfg.lockOpts...)
		if err != nil {
			return
		}
		defer l.Settle(ctx)
		// A try that loses means another caller refreshes it (or Redis
		// failed: the next stale read tries again).
		cp := &compute{c: c, l: l, key: key, ttl: ttl, fn: fn}
		_, res, err := cp.result(l.TryDo(ctx, cp.run))
		refreshed = err == nil && res == Computed
	}()
}

// refreshPause is how long a process waits before it tries to refresh a
// stale key again after a try that another process won, or that failed:
// a quarter of the soft TTL, from 50 ms to 5 s.
func (c *Cache) refreshPause() time.Duration {
	return min(max(c.cfg.staleAfter/4, 50*time.Millisecond), 5*time.Second)
}

// flightGroup runs one call per key at a time in this process; callers
// that come while it runs wait for its result.
type flightGroup struct {
	mu    sync.Mutex
	calls map[string]*flight
}

type flight struct {
	done   chan struct{}
	v      []byte
	res    Result
	err    error
	gaveUp bool // f failed, and the leader's context had ended when it returned
}

// do runs f for key, with ctx the context f uses, unless a call for key
// is running, in which case it waits for that call's result (shared true;
// gaveUp when that call's context had ended when it returned), or for ctx
// to end.
func (g *flightGroup) do(ctx context.Context, key string, f func() ([]byte, Result, error)) (v []byte, res Result, err error, shared, gaveUp bool) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[string]*flight{}
	}
	if fl, ok := g.calls[key]; ok {
		g.mu.Unlock()
		select {
		case <-fl.done:
			return fl.v, fl.res, fl.err, true, fl.gaveUp
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("cache %q: %w: %w", key, redislock.ErrLocked, ctx.Err()), false, false
		}
	}
	fl := &flight{done: make(chan struct{}), err: ErrComputePanicked} // until f returns
	g.calls[key] = fl
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.calls, key)
		g.mu.Unlock()
		close(fl.done)
	}()
	fl.v, fl.res, fl.err = f()
	fl.gaveUp = fl.err != nil && ctx.Err() != nil
	return fl.v, fl.res, fl.err, false, false
}
