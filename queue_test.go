package redislock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
)

// 32 goroutines waiting for one lock through one client use one connection
// between them (one BLPOP at a time), and all get the lock in turn.
func TestLocalQueueSharesOneConnection(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	holder := mustNew(t, s.Client(), "job")
	mustAcquire(t, ctx, holder)
	shared := s.Client()
	const waiters = 32
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got []int
	)
	for i := 0; i < waiters; i++ {
		l := mustNew(t, shared, "job")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	waitBlocked(t, admin, 1)
	// Once every waiter has made its first try (those run at once, on as
	// many connections), the steady state is one BLPOP and one connection
	// in use (at most), for 200 ms on end. Each waiter in BLPOP (no queue)
	// would never get there.
	var steadySince time.Time
	var blocked, inUse int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := shared.PoolStats()
		blocked, inUse = blockedClients(t, admin), int(st.TotalConns-st.IdleConns)
		if blocked != 1 || inUse > 1 {
			steadySince = time.Time{}
		} else if steadySince.IsZero() {
			steadySince = time.Now()
		} else if time.Since(steadySince) > 200*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d local waiters: %d blocked in BLPOP, %d connections in use; want 1 and at most 1", waiters, blocked, inUse)
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(got) != waiters {
		t.Fatalf("%d of %d waiters got the lock", len(got), waiters)
	}
	t.Logf("the shared client opened %d connections for %d waiters", shared.PoolStats().TotalConns, waiters)
}

// A queued waiter whose context ends leaves the queue; the head's leaving
// hands the Redis wait to the next.
func TestLocalQueueLeavers(t *testing.T) {
	s, ctx, admin := started(t)
	holder := mustNew(t, s.Client(), "job")
	mustAcquire(t, ctx, holder)
	shared := s.Client()
	headCtx, cancelHead := context.WithCancel(ctx)
	head := acquireAsync(headCtx, mustNew(t, shared, "job"))
	waitBlocked(t, admin, 1)
	midCtx, cancelMid := context.WithCancel(ctx)
	mid := acquireAsync(midCtx, mustNew(t, shared, "job"))
	last := acquireAsync(ctx, mustNew(t, shared, "job"))
	// mid and last heard "held" and queued behind the head.
	within(t, 10*time.Second, "mid and last queue behind the head", func() bool { return redislock.QueuedWaiters() == 3 })

	cancelMid() // a queued waiter gives up at once
	if r := receive(t, mid); !errors.Is(r.err, redislock.ErrLocked) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("queued waiter after cancel: %v, want ErrLocked and Canceled", r.err)
	}
	cancelHead() // the head gives up at once; its BLPOP is finished in the background
	if r := receive(t, head); !errors.Is(r.err, redislock.ErrLocked) {
		t.Fatalf("head after cancel: %v, want ErrLocked", r.err)
	}
	waitBlocked(t, admin, 1) // the last one now waits in Redis
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	heldSoonAfter(t, last, released, "the last waiter")
}

// A waiter that becomes head of the local queue sleeps in Redis no longer
// than the holder's remaining TTL as the previous head last saw it, not as
// it saw it itself when it queued, long before: a dead holder's key that
// expires while it waits in the queue still wakes it at once.
func TestQueuedWaiterWakesAtTheHoldersTTL(t *testing.T) {
	t.Parallel()
	const ttl = 1500 * time.Millisecond
	s, ctx, admin := started(t)
	holder := mustNew(t, s.Client(), "job", redislock.WithExpire(ttl))
	start := time.Now()
	mustAcquire(t, ctx, holder) // and never releases
	shared := s.Client()
	headCtx, cancel := context.WithTimeout(ctx, ttl*2/3)
	defer cancel()
	head := acquireAsync(headCtx, mustNew(t, shared, "job"))
	waitBlocked(t, admin, 1)
	next := acquireAsync(ctx, mustNew(t, shared, "job")) // queues behind the head, learning the TTL now
	if r := receive(t, head); !errors.Is(r.err, redislock.ErrLocked) {
		t.Fatalf("head.Acquire() = %v, want ErrLocked at its deadline", r.err)
	}
	r := receive(t, next)
	if r.err != nil {
		t.Fatalf("next.Acquire() = %v", r.err)
	}
	took := r.at.Sub(start)
	t.Logf("holder acquired -> queued waiter holding: %v (ttl %v)", took, ttl)
	if took > ttl+400*time.Millisecond {
		t.Fatalf("queued waiter acquired %v after the holder, want within ttl + 400ms = %v", took, ttl+400*time.Millisecond)
	}
}
