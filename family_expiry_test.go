package redislock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// Holders that crashed leave their entries in a Semaphore's or an
// RWMutex's sorted sets until a script drops them at their expiry. These
// tests write such entries as a crashed process leaves them (an id scored
// by its expiry on the server's clock) and check that the scripts free
// what they held for the living, and wake who waits for it.

// serverMS is the server's clock in milliseconds, as the scripts read it.
func serverMS(t *testing.T, ctx context.Context, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

// crashed adds a holder (or a waiting registration) id to the sorted set
// key, expiring at server time at.
func crashed(t *testing.T, ctx context.Context, c *redis.Client, key, id string, at int64) {
	t.Helper()
	if err := c.ZAdd(ctx, key, redis.Z{Score: float64(at), Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
}

// expireNow moves the expiry of the crashed entries of key to the past:
// their time is up, and no script has looked since.
func expireNow(t *testing.T, ctx context.Context, c *redis.Client, key string, ids ...string) {
	t.Helper()
	past := serverMS(t, ctx, c) - 1000
	for _, id := range ids {
		if err := c.ZAddXX(ctx, key, redis.Z{Score: float64(past), Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// acquireIn takes a permit of sem within wokenWithin (the waiter's slice
// is longer: the holders' expiry is far) and keeps it until the test
// ends (a release would wake the next waiter itself); the error, if
// any, comes on the channel.
func acquireIn(t *testing.T, ctx context.Context, sem *redislock.Semaphore) <-chan error {
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, wokenWithin)
		defer cancel()
		p, err := sem.Acquire(wctx)
		if err == nil {
			t.Cleanup(func() { p.Release(context.Background()) })
		}
		got <- err
	}()
	return got
}

// An acquire that drops crashed holders wakes a waiter for each other
// permit they held: a waiter blocked while the semaphore was full gets in
// at once, not at the end of its slice.
func TestSemaphoreAcquireWakesForCrashedHolders(t *testing.T) {
	s, ctx, admin := started(t)
	far := serverMS(t, ctx, admin) + time.Hour.Milliseconds()
	// Size 2, both permits held by crashed processes (as their acquires
	// left them: the holders and the size).
	crashed(t, ctx, admin, "lock-sem:{pool}", "crashed-1", far)
	crashed(t, ctx, admin, "lock-sem:{pool}", "crashed-2", far)
	if err := admin.Set(ctx, "lock-sem-size:{pool}", 2, 0).Err(); err != nil {
		t.Fatal(err)
	}
	waiter := mustSemaphore(t, s.Client(), "pool", 2)
	got := acquireIn(t, ctx, waiter)
	waitBlocked(t, admin, 1)
	expireNow(t, ctx, admin, "lock-sem:{pool}", "crashed-1", "crashed-2")
	// Another process comes and takes one of the two permits freed.
	third := mustSemaphore(t, s.Client(), "pool", 2)
	p, err := third.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	if err := <-got; err != nil {
		t.Fatalf("waiter after the crashed holders were dropped: %v; want the other freed permit within %v", err, wokenWithin)
	}
}

// A release that also drops crashed holders wakes a waiter for each permit
// freed, its own and theirs: two waiters both get in at once.
func TestSemaphoreReleaseWakesForCrashedHolders(t *testing.T) {
	s, ctx, admin := started(t)
	holder := mustSemaphore(t, s.Client(), "pool", 2)
	p, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	crashed(t, ctx, admin, "lock-sem:{pool}", "crashed", serverMS(t, ctx, admin)+time.Hour.Milliseconds())
	// Two waiters of two processes (a client each: one process's waiters
	// queue behind its first, which would let the second in by itself).
	got1 := acquireIn(t, ctx, mustSemaphore(t, s.Client(), "pool", 2))
	got2 := acquireIn(t, ctx, mustSemaphore(t, s.Client(), "pool", 2))
	waitBlocked(t, admin, 2)
	expireNow(t, ctx, admin, "lock-sem:{pool}", "crashed")
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i, got := range []<-chan error{got1, got2} {
		if err := <-got; err != nil {
			t.Fatalf("waiter %d after the release: %v; want both in within %v (the release frees the crashed holder's permit too)", i+1, err, wokenWithin)
		}
	}
}

// A writer drops crashed readers before it looks: one whose time is up
// neither keeps it out nor sets how long it sleeps. Beside a live reader
// (30 s to go) it waits out its slice in one BLPOP, not in 2 ms slices
// timed by the crashed reader's past expiry.
func TestRWMutexWriterDropsCrashedReaders(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		past := float64(now.Add(-time.Second).UnixMilli())
		if err := c.ZAdd(ctx, "lock-rw-readers:{cfg}", redis.Z{Score: past, Member: "crashed-reader"}).Err(); err != nil {
			t.Fatal(err)
		}
		w := newRWMutex(t, c, "cfg")
		if err := w.TryLock(ctx); err != nil {
			t.Fatalf("TryLock with only a crashed reader, its time up = %v; want the write hold", err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		reader := newRWMutex(t, c, "cfg")
		p, err := reader.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		if err := c.ZAdd(ctx, "lock-rw-readers:{cfg}", redis.Z{Score: past, Member: "crashed-reader"}).Err(); err != nil {
			t.Fatal(err)
		}
		var wakeups atomic.Int64
		obs := &redislock.Observer{Wakeup: func(context.Context, redislock.Event) { wakeups.Add(1) }}
		waiter := newRWMutex(t, c, "cfg", redislock.WithObserver(obs))
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if err := waiter.Lock(wctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("Lock beside a live reader = %v, want ErrLocked at the deadline", err)
		}
		if n := wakeups.Load(); n > 5 {
			t.Fatalf("the writer woke %d times in 500 ms beside a reader with 30 s to go; want one slice (the crashed reader's past expiry set its slices)", n)
		}
	})
}

// Readers a writer's release let in hold the next writer back only for a
// while: when an admitted reader's process crashed before it came in, a
// waiting writer still gets in once the admission lapses (a waiting
// registration's time: a slice and a second).
func TestRWMutexAdmissionLapses(t *testing.T) {
	t.Parallel() // 3 s of waiting on its own server
	s, ctx, admin := started(t)
	first := newRWMutex(t, s.Client(), "cfg")
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A reader of a process that then crashed registered as waiting.
	crashed(t, ctx, admin, "lock-rw-waiting:{cfg}", "crashed-reader-queue", serverMS(t, ctx, admin)+time.Hour.Milliseconds())
	next := newRWMutex(t, s.Client(), "cfg")
	got := make(chan error, 1)
	start := time.Now()
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		got <- next.Lock(wctx)
	}()
	waitBlocked(t, admin, 1)
	if err := first.Unlock(ctx); err != nil { // admits the crashed reader
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting writer behind an admitted reader that never came: %v; want in once the admission lapsed", err)
	}
	t.Logf("the writer got in %v after it started waiting", time.Since(start).Round(time.Millisecond))
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
