package redislock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// Busy and down are told apart: ErrLocked only when Redis answered that
// another owner holds the lock, ErrUnreachable when it did not answer. A
// cron job that skips its run on ErrLocked must not skip silently through
// an outage.
func TestBusyAndDownAreToldApart(t *testing.T) {
	quick(t)
	ctx := ctxT(t)
	check := func(t *testing.T, what string, err error, want, not error, alsoCtx bool) {
		t.Helper()
		if !errors.Is(err, want) || errors.Is(err, not) || (alsoCtx && !errors.Is(err, context.DeadlineExceeded)) {
			t.Fatalf("%s = %v; want %v (and the deadline: %v), not %v", what, err, want, alsoCtx, not)
		}
	}

	t.Run("down", func(t *testing.T) {
		// Nothing listens on loopback port 1: every dial is refused.
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		// Each call has a Lock and a context of its own: go-redis may retry
		// the dial until the context ends (v9.23 does, with backoff), and a
		// failed attempt leaves a giveback that the same Lock's next call
		// would wait for first.
		fresh := func() context.Context {
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			t.Cleanup(cancel)
			return cctx
		}
		check(t, "TryAcquire with Redis down", mustNew(t, c, "job").TryAcquire(fresh()), redislock.ErrUnreachable, redislock.ErrLocked, false)
		check(t, "Acquire with Redis down", mustNew(t, c, "job").Acquire(fresh()), redislock.ErrUnreachable, redislock.ErrLocked, false)
		sem, err := redislock.NewSemaphore(c, "pool", 2)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sem.TryAcquire(fresh())
		check(t, "Semaphore.TryAcquire with Redis down", err, redislock.ErrUnreachable, redislock.ErrLocked, false)
		ran := false
		err = mustNew(t, c, "job").TryDo(fresh(), func(context.Context) error { ran = true; return nil })
		check(t, "TryDo with Redis down", err, redislock.ErrUnreachable, redislock.ErrLocked, false)
		if ran {
			t.Fatal("TryDo ran fn without the lock")
		}
	})

	t.Run("busy", func(t *testing.T) {
		s := redistest.Start(t)
		mustAcquire(t, ctx, mustNew(t, s.Client(), "job"))
		l := mustNew(t, s.Client(), "job")
		check(t, "TryAcquire on a held lock", l.TryAcquire(ctx), redislock.ErrLocked, redislock.ErrUnreachable, false)
		dctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		check(t, "Acquire(150 ms) on a held lock", l.Acquire(dctx), redislock.ErrLocked, redislock.ErrUnreachable, true)
	})

	t.Run("busy-then-silent", func(t *testing.T) {
		// Redis stops answering (its connections open) while a waiter
		// waits behind a holder: when its context ends, Redis does not
		// answer the read that asks whether it is still there, so the
		// outage is told (ErrUnreachable with the deadline), not a busy
		// lock. (A connection lost: busy-then-down; Redis still there
		// when the wait is given up: busy.)
		s := redistest.Start(t)
		t.Cleanup(s.Cont)
		mustAcquire(t, ctx, mustNew(t, s.Client(), "job"))
		l := mustNew(t, s.Client(), "job")
		dctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
		defer cancel()
		got := make(chan error, 1)
		go func() { got <- l.Acquire(dctx) }()
		waitBlocked(t, s.Client(), 1) // the waiter sleeps in BLPOP
		s.Pause()
		err := <-got
		s.Cont()
		check(t, "Acquire with Redis paused during the wait", err, redislock.ErrUnreachable, redislock.ErrLocked, true)
		if err := l.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("silent-release-and-retry", func(t *testing.T) {
		// With Redis silent, a Release with a deadline, and an Acquire
		// after a try that got no answer (its cleanup still pending), say
		// Redis did not answer.
		s := redistest.Start(t)
		t.Cleanup(s.Cont)
		c := s.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.MaxRetries = -1 })
		held := mustNew(t, c, "held")
		mustAcquire(t, ctx, held)
		other := mustNew(t, c, "other")
		s.Pause()
		short := func() context.Context {
			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			t.Cleanup(cancel)
			return sctx
		}
		check(t, "Release with Redis paused", held.Release(short()), redislock.ErrUnreachable, redislock.ErrNotAcquired, false)
		check(t, "TryAcquire with Redis paused", other.TryAcquire(short()), redislock.ErrUnreachable, redislock.ErrLocked, false)
		check(t, "Acquire after an unanswered try", other.Acquire(short()), redislock.ErrUnreachable, redislock.ErrLocked, false)
		s.Cont()
	})

	t.Run("ended-context", func(t *testing.T) {
		// A context that has ended before the call: nothing is asked,
		// nothing is known of the lock (free here) and nothing is sent.
		s := redistest.Start(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		for name, try := range map[string]func(*redislock.Lock) error{
			"Acquire":    func(l *redislock.Lock) error { return l.Acquire(cctx) },
			"TryAcquire": func(l *redislock.Lock) error { return l.TryAcquire(cctx) },
		} {
			err := try(mustNew(t, s.Client(), "job"))
			if !errors.Is(err, context.Canceled) || errors.Is(err, redislock.ErrLocked) || errors.Is(err, redislock.ErrUnreachable) {
				t.Fatalf("%s(cancelled) on a free lock = %v, want Canceled alone", name, err)
			}
		}
		if n := s.Client().Exists(ctx, "lock:job").Val(); n != 0 {
			t.Fatalf("lock:job exists after calls with an ended context")
		}
	})

	t.Run("busy-then-down", func(t *testing.T) {
		// A waiter heard "held" and waits; then Redis goes away. Its
		// Acquire ends with the outage, not with ErrLocked.
		s := redistest.Start(t)
		p := proxyTo(t, s)
		mustAcquire(t, ctx, mustNew(t, s.Client(), "job"))
		c := clientVia(t, p, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
		waiter := mustNew(t, c, "job")
		got := acquireAsync(ctx, waiter)
		waitBlocked(t, s.Client(), 1)
		p.Close()
		r := receive(t, got)
		check(t, "Acquire when Redis goes away during the wait", r.err, redislock.ErrUnreachable, redislock.ErrLocked, false)
	})
}

// Misuse gets a clear error, sending nothing: a nil fn for Do, TryDo and
// RDo, and the calls of a Lock, Semaphore or RWMutex made without its
// constructor (a zero Lock blocked forever, a zero Semaphore panicked).
func TestMisuseIsRefused(t *testing.T) {
	b := miniBackend(t)
	ctx := ctxT(t)
	c := b.client()
	l := mustNew(t, c, "job")
	sem := mustSemaphore(t, c, "pool", 2)
	rw := mustRWMutex(t, c, "cfg")
	for name, err := range map[string]error{
		"Lock.Do(nil)":        l.Do(ctx, nil),
		"Lock.TryDo(nil)":     l.TryDo(ctx, nil),
		"Semaphore.Do(nil)":   sem.Do(ctx, nil),
		"Semaphore.TryDo":     sem.TryDo(ctx, nil),
		"RWMutex.Do(nil)":     rw.Do(ctx, nil),
		"RWMutex.RDo(nil)":    rw.RDo(ctx, nil),
		"zero Lock.Acquire":   new(redislock.Lock).Acquire(ctx),
		"zero Lock.Release":   new(redislock.Lock).Release(ctx),
		"zero Lock.Do":        new(redislock.Lock).Do(ctx, func(context.Context) error { return nil }),
		"zero RWMutex.Lock":   new(redislock.RWMutex).Lock(ctx),
		"zero RWMutex.Unlock": new(redislock.RWMutex).Unlock(ctx),
	} {
		if !errors.Is(err, redislock.ErrInvalidArgument) {
			t.Errorf("%s = %v; want ErrInvalidArgument", name, err)
		}
	}
	if _, err := new(redislock.Semaphore).TryAcquire(ctx); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Errorf("zero Semaphore.TryAcquire = %v; want ErrInvalidArgument", err)
	}
	if _, err := new(redislock.RWMutex).RLock(ctx); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Errorf("zero RWMutex.RLock = %v; want ErrInvalidArgument", err)
	}
	if keys := b.mini.Keys(); len(keys) != 0 {
		t.Fatalf("misuse wrote %v; want nothing", keys)
	}
}

// A Redis that answers slowly (here 400 ms each way: a round trip well
// beyond what a loopback takes, within the client's 3 s read timeout) is
// not an outage: a wait given up on a lock held there is told as busy.
func TestBusyBehindASlowRedisIsBusy(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	mustAcquire(t, ctx, mustNew(t, s.Client(), "job"))
	p := proxyTo(t, s)
	c := clientVia(t, p)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.SetLatency(400 * time.Millisecond)
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	l := mustNew(t, c, "job")
	if err := l.Acquire(dctx); !errors.Is(err, redislock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redislock.ErrUnreachable) {
		t.Fatalf("Acquire(2 s) behind a slow Redis = %v; want ErrLocked and the deadline", err)
	}
	p.SetLatency(0)
	if err := l.Settle(ctx); err != nil {
		t.Fatal(err)
	}
}

// Goroutines sharing a Semaphore: the second, queued behind the first,
// tries as soon as the first gets in; when Redis stops answering that try
// and its context ends, it is told the outage (ErrUnreachable), not a busy
// semaphore, though Redis said "all held" earlier in its Acquire.
func TestSilentFollowUpTryIsAnOutage(t *testing.T) {
	quick(t)
	s := redistest.Start(t)
	t.Cleanup(s.Cont)
	ctx := ctxT(t)
	// The second waiter's tries (its context carries secondKey): the
	// first is answered (all held); the next waits here until the first
	// waiter is in, and goes to a Redis that no longer answers.
	var tries atomic.Int32
	firstIn := make(chan struct{})
	type secondKey struct{}
	c := s.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	c.AddHook(commandHook(func(hctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if args := cmd.Args(); len(args) > 1 && args[1] == wire.SemAcquire.Hash() && hctx.Value(secondKey{}) != nil {
			if tries.Add(1) == 2 {
				<-firstIn
				s.Pause()
			}
		}
		return next(hctx, cmd)
	}))
	holder := mustSemaphore(t, s.Client(), "pool", 1)
	held, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shared := mustSemaphore(t, c, "pool", 1)
	first := make(chan error, 1)
	go func() {
		p, err := shared.Acquire(ctx)
		if err == nil {
			t.Cleanup(func() { p.Release(context.Background()) })
		}
		first <- err
	}()
	waitBlocked(t, s.Client(), 1) // the first waits in Redis
	second := make(chan error, 1)
	dctx, cancel := context.WithTimeout(context.WithValue(ctx, secondKey{}, true), 2*time.Second)
	defer cancel()
	go func() { _, err := shared.Acquire(dctx); second <- err }()
	// The second tries once (all held) and queues behind the first.
	for deadline := time.Now().Add(10 * time.Second); tries.Load() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second waiter never tried")
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first waiter: %v", err)
	}
	close(firstIn)
	err = <-second
	s.Cont()
	if !errors.Is(err, redislock.ErrUnreachable) || errors.Is(err, redislock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the second waiter, its follow-up try unanswered = %v; want ErrUnreachable and the deadline, not ErrLocked", err)
	}
	if tries.Load() < 2 {
		t.Fatal("the follow-up try was never sent")
	}
}
