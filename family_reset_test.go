package redislock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// wokenWithin is how long a waiter blocked on a held Semaphore or RWMutex
// may take to get in once a Reset frees it: far more than a wake-up takes,
// less than the 2 s slice a waiter that nobody woke sleeps out (the
// holders here keep the default 30 s expire, so the slice is the longest).
const wokenWithin = 1500 * time.Millisecond

// A Reset wakes who waits: a Semaphore's waiter and an RWMutex's writer
// get in at once, not at the end of their slice.
func TestResetWakesTheFamilysWaiters(t *testing.T) {
	t.Run("semaphore", func(t *testing.T) {
		s, ctx, _ := started(t)
		holder := mustSemaphore(t, s.Client(), "pool", 1)
		if _, err := holder.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		waiter := mustSemaphore(t, s.Client(), "pool", 1)
		got := make(chan error, 1)
		wctx, cancel := context.WithTimeout(ctx, wokenWithin)
		defer cancel()
		go func() {
			p, err := waiter.Acquire(wctx)
			if err == nil {
				err = p.Release(ctx)
			}
			got <- err
		}()
		waitBlocked(t, s.Client(), 1)
		if n, err := holder.Reset(ctx); err != nil || n != 1 {
			t.Fatalf("Reset = %d, %v; want 1 holder dropped", n, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter after Reset: %v; want a permit within %v", err, wokenWithin)
		}
	})
	t.Run("rwmutex-writer", func(t *testing.T) {
		s, ctx, _ := started(t)
		reader := newRWMutex(t, s.Client(), "cfg")
		if _, err := reader.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		writer := newRWMutex(t, s.Client(), "cfg")
		got := make(chan error, 1)
		wctx, cancel := context.WithTimeout(ctx, wokenWithin)
		defer cancel()
		go func() {
			err := writer.Lock(wctx)
			if err == nil {
				err = writer.Unlock(ctx)
			}
			got <- err
		}()
		waitBlocked(t, s.Client(), 1)
		if n, err := reader.Reset(ctx); err != nil || n != 1 {
			t.Fatalf("Reset = %d, %v; want 1 reader dropped", n, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("writer after Reset: %v; want the write hold within %v", err, wokenWithin)
		}
	})
}

// Reset forgets who waits to write: a writer whose process died while it
// waited leaves its registration (until it lapses), and readers wait
// behind it; after a Reset a reader gets in at once.
func TestRWMutexResetForgetsWaitingWriters(t *testing.T) {
	s, ctx, admin := started(t)
	now, err := admin.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// What a waiting writer's try leaves (rw_lib.lua's register): its id
	// in the waiting writers, scored by when the registration lapses.
	lapses := float64(now.Add(time.Hour).UnixMilli())
	if err := admin.ZAdd(ctx, "lock-rw-writers:{cfg}", redis.Z{Score: lapses, Member: "dead-writer"}).Err(); err != nil {
		t.Fatal(err)
	}
	rw := newRWMutex(t, s.Client(), "cfg")
	if _, err := rw.TryRLock(ctx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("TryRLock behind a waiting writer = %v, want ErrLocked (writers go first)", err)
	}
	if _, err := rw.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock after Reset = %v; want in: Reset forgets the waiting writers", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A writer whose hold was reset, and then taken by another, frees nothing
// with its Unlock: it says ErrNotAcquired and the new writer keeps the
// write hold.
func TestRWMutexUnlockAfterResetSparesTheNewWriter(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		old, next := newRWMutex(t, b.client(), "cfg"), newRWMutex(t, b.client(), "cfg")
		if err := old.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := old.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		if err := next.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := old.Unlock(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("the reset writer's Unlock = %v, want ErrNotAcquired", err)
		}
		st, err := next.Status(ctx)
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Kind != redislock.KindWriter {
			t.Fatalf("Status after the old writer's Unlock = %+v, %v; want the new writer still holding", st, err)
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatalf("the new writer's Unlock = %v", err)
		}
	})
}

// List gives the holders of one name in the order of their owner ids, so
// that two listings of the same holders read the same.
func TestListSortsHoldersByOwner(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		const n = 8
		sem := mustSemaphore(t, b.client(), "pool", n)
		for range n {
			if _, err := sem.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
		}
		list, err := redislock.List(ctx, b.client(), "*")
		if err != nil || len(list) != n {
			t.Fatalf("List = %d entries, %v; want %d", len(list), err, n)
		}
		if !slices.IsSortedFunc(list, func(a, b redislock.LockInfo) int { return strings.Compare(a.Owner, b.Owner) }) {
			t.Fatalf("List's holders of one semaphore are not sorted by owner: %v", list)
		}
	})
}

// A Semaphore's size key expires with its last holder: once every holder
// has gone (crashed, expired untouched), another size is accepted.
func TestSemaphoreSizeKeyExpiresWithItsHolders(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		sem := mustSemaphore(t, c, "pool", 2, redislock.WithExpire(time.Minute))
		if _, err := sem.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		ttl, err := c.PTTL(ctx, "lock-sem-size:{pool}").Result()
		if err != nil || ttl <= 0 || ttl > time.Minute {
			t.Fatalf("PTTL of the size key = %v, %v; want the holder's expire (at most a minute)", ttl, err)
		}
	})
}

// A permit's fencing token goes on from the fence key when the key is
// ahead of the clock (a clock stepped back, a restored fence key), as the
// Lock's does: tokens only grow.
func TestSemaphoreFencingTokensOutrunTheClock(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		const ahead = int64(1) << 52 // microseconds: in the year 2112, and exact in Lua's doubles
		if err := c.Set(ctx, "lock-sem-fence:{pool}", ahead, 0).Err(); err != nil {
			t.Fatal(err)
		}
		sem := mustSemaphore(t, c, "pool", 2, redislock.WithFencing())
		for i := int64(1); i <= 3; i++ {
			p, err := sem.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Token(); got != ahead+i {
				t.Fatalf("grant %d: Token() = %d, want the fence %d + %d", i, got, ahead, i)
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// newRWMutex is redislock.NewRWMutex that fails the test on error.
func newRWMutex(t testing.TB, c redis.UniversalClient, name string, opts ...redislock.Option) *redislock.RWMutex {
	t.Helper()
	rw, err := redislock.NewRWMutex(c, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rw
}
