package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
)

// The Semaphore and RWMutex with a client shared by their waiters, and the
// state a failed try leaves.

// Readers that share one client (one local wait queue: only its head waits
// in Redis) all come in together at a writer's Unlock, before a second
// writer that waited on a client of its own; not one slice apart.
func TestRWMutexReadersSharingAClientComeInTogether(t *testing.T) {
	t.Parallel()
	s, ctx, _ := started(t)
	shared := s.Client()
	w1 := mustRWMutex(t, s.Client(), "cfg")
	if err := w1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var log entryLog
	log.enter(t, ctx, "W2", mustRWMutex(t, s.Client(), "cfg"), true, 200*time.Millisecond)
	waitInfoWithin(t, ctx, w1, 10*time.Second, "W2 waits", func(i rwInfo) bool { return i.WaitingWriters == 1 })
	for i := range 4 {
		log.enter(t, ctx, fmt.Sprintf("R%d", i), mustRWMutex(t, shared, "cfg"), false, 200*time.Millisecond)
	}
	// The readers' registration must outlive a slice and a second: the
	// followers in the local queue send nothing meanwhile.
	time.Sleep(3500 * time.Millisecond)
	released := time.Now()
	if err := w1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	entries := log.wait()
	order := whoOf(entries)
	var lateness []time.Duration
	for _, e := range entries {
		if e.who != "W2" {
			lateness = append(lateness, e.at.Sub(released).Round(time.Millisecond))
		}
	}
	sort.Slice(lateness, func(i, j int) bool { return lateness[i] < lateness[j] })
	t.Logf("order %v; readers in after %v", order, lateness)
	if len(lateness) != 4 {
		t.Fatalf("order %v; want the four readers and W2", order)
	}
	if order[len(order)-1] != "W2" {
		t.Fatalf("order %v: W2 before some of the readers that waited on a shared client", order)
	}
	if lateness[3] > 500*time.Millisecond {
		t.Fatalf("readers in after %v; want all within milliseconds of the release", lateness)
	}
}

// Semaphore waiters that share one client both get in when two holders'
// permits expire, not one slice apart.
func TestSemaphoreWaitersSharingAClientAfterExpiry(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	h := mustSemaphore(t, s.Client(), "pool", 2, redislock.WithExpire(time.Second))
	for range 2 {
		if _, err := h.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held := time.Now()
	shared := s.Client()
	got := make(chan time.Time, 2)
	w := mustSemaphore(t, shared, "pool", 2)
	for range 2 {
		go func() {
			p, err := w.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- time.Now()
			if p != nil {
				p.Release(ctx)
			}
		}()
	}
	a, b := <-got, <-got
	t.Logf("waiters in %v and %v after the holders' 1s permits began", a.Sub(held).Round(time.Millisecond), b.Sub(held).Round(time.Millisecond))
	if b.Sub(held) > 1500*time.Millisecond {
		t.Fatalf("second waiter in %v after the permits began; want both at their expiry (1 s)", b.Sub(held))
	}
}

// A TryRLock that failed leaves no registration: a writer waiting behind
// the first comes in at its Unlock, not a signal expire or a slice later.
// A Lock that gave up leaves none either: readers come in at once.
func TestRWMutexFailedTriesLeaveNothing(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	w1, w2, r := mustRWMutex(t, s.Client(), "cfg"), mustRWMutex(t, s.Client(), "cfg"), mustRWMutex(t, s.Client(), "cfg")
	if err := w1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.TryRLock(ctx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("TryRLock under a writer = %v", err)
	}
	if info, _ := r.Info(ctx); info.WaitingReaders != 0 {
		t.Fatalf("a failed TryRLock left %d waiting readers", info.WaitingReaders)
	}
	got := make(chan time.Time, 1)
	go func() {
		if err := w2.Lock(ctx); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	waitBlocked(t, s.Client(), 1) // W2 waits in Redis
	released := time.Now()
	w1.Unlock(ctx)
	in := <-got
	t.Logf("W2 in %v after W1's Unlock", in.Sub(released))
	if in.Sub(released) > 300*time.Millisecond {
		t.Fatalf("W2 in %v after W1's Unlock; want at once", in.Sub(released))
	}
	// W2 holds; a Lock that gives up must not hold readers back after.
	// Three times: the first also loads the scripts (NOSCRIPT, then EVAL),
	// which changes the order in which its cleanups reach Redis.
	w3 := mustRWMutex(t, s.Client(), "cfg")
	for round := range 3 {
		gctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := w3.Lock(gctx)
		cancel()
		if !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("Lock that gave up = %v", err)
		}
		w3.Settle(ctx) // its registration is taken back in the background
		w2.Unlock(ctx)
		start := time.Now()
		if err := r.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		t.Logf("round %d: RLock after a writer gave up: %v", round, took)
		if took > 300*time.Millisecond {
			t.Fatalf("RLock took %v after a writer gave up waiting; want at once", took)
		}
		r.RUnlock(ctx)
		if err := w2.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w2.Unlock(ctx)
	// Reset forgets who waits.
	if err := w1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	gctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	w3.Lock(gctx)
	cancel()
	if _, err := w1.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if info, _ := w1.Info(ctx); info.WaitingWriters != 0 || info.WaitingReaders != 0 {
		t.Fatalf("after Reset: %+v; want nobody registered as waiting", info)
	}
}

// The size mismatch names both sizes.
func TestSemaphoreSizeMismatchNamesBothSizes(t *testing.T) {
	quick(t)
	b := miniBackend(t)
	ctx := ctxT(t)
	two := mustSemaphore(t, b.client(), "pool", 2)
	if _, err := two.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	three := mustSemaphore(t, b.client(), "pool", 3)
	_, err := three.TryAcquire(ctx)
	if !errors.Is(err, redislock.ErrSizeMismatch) || !strings.Contains(err.Error(), "size 2") || !strings.Contains(err.Error(), "3") {
		t.Fatalf("TryAcquire = %v; want ErrSizeMismatch naming sizes 2 and 3", err)
	}
}
