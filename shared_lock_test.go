package redislock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
)

// One *Lock shared by goroutines behaves as a sync.Mutex: they take turns
// (never two inside, none refused), a goroutine that acquires again while
// it holds waits, TryAcquire finds a held Lock busy, and a hold that was
// lost keeps the turn until its Release, so that Release can never free
// another goroutine's hold.
func TestSharedLockIsAMutex(t *testing.T) {
	onBoth(t, func(t *testing.T, b *backend) {
		ctx := ctxT(t)
		l := mustNew(t, b.client(), "job", redislock.WithExpire(time.Minute))

		// Three goroutines, 20 turns each: every Acquire succeeds, and
		// never two are inside at once.
		var inside, most, turns atomic.Int32
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					if err := l.Acquire(ctx); err != nil {
						t.Errorf("Acquire() on a shared Lock = %v, want nil (its turn)", err)
						return
					}
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					turns.Add(1)
					inside.Add(-1)
					if err := l.Release(ctx); err != nil {
						t.Errorf("Release() = %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if turns.Load() != 60 || most.Load() != 1 {
			t.Fatalf("%d turns, at most %d inside at once; want 60 and 1", turns.Load(), most.Load())
		}

		// Held: TryAcquire is busy, Acquire again waits (here until its
		// context ends), from this goroutine as from another.
		mustAcquire(t, ctx, l)
		if err := l.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("TryAcquire() on a held Lock = %v, want ErrLocked", err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := l.Acquire(short)
		cancel()
		if !errors.Is(err, redislock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire() again while holding = %v, want ErrLocked and DeadlineExceeded", err)
		}
		// Released from another goroutine, as a sync.Mutex may be: the
		// waiter goes ahead.
		got := make(chan error, 1)
		go func() { got <- l.Acquire(ctx) }()
		select {
		case err := <-got:
			t.Fatalf("a waiter's Acquire() returned %v while the Lock was held", err)
		case <-time.After(50 * time.Millisecond):
		}
		go l.Release(ctx)
		if err := <-got; err != nil {
			t.Fatalf("the waiter's Acquire() after the Release = %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// A lost hold keeps the turn: another goroutine's Acquire waits
		// for the loser's Release (the key is free for other owners
		// meanwhile), and that Release leaves the waiter's new hold
		// alone.
		lost := mustNew(t, b.client(), "lost", redislock.WithExpire(time.Minute))
		mustAcquire(t, ctx, lost)
		b.client().Del(ctx, lost.Key()) // lost, as to a Reset
		if b.mini == nil {
			<-lost.Done() // the watch tells at once (miniredis refuses it)
		}
		next := make(chan error, 1)
		go func() { next <- lost.Acquire(ctx) }()
		select {
		case err := <-next:
			t.Fatalf("Acquire() after another goroutine's loss returned %v before that hold's Release", err)
		case <-time.After(100 * time.Millisecond):
		}
		if err := lost.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("Release() of the lost hold = %v, want ErrNotAcquired", err)
		}
		if err := <-next; err != nil {
			t.Fatalf("the waiter's Acquire() = %v", err)
		}
		if owner := b.client().Get(ctx, lost.Key()).Val(); owner != lost.ID() {
			t.Fatalf("the waiter's key holds %q, want its id %q", owner, lost.ID())
		}
		if err := lost.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Do on a *Lock shared by goroutines: a goroutine's TryDo while another's
// Do runs finds it busy, even after that Do's hold was lost; once the
// Do has returned (releasing its turn), TryDo runs.
func TestSharedLockDoTakesTurns(t *testing.T) {
	onBoth(t, func(t *testing.T, b *backend) {
		ctx := ctxT(t)
		l := mustNew(t, b.client(), "job", redislock.WithExpire(time.Minute))
		err := l.Do(ctx, func(context.Context) error {
			b.client().Del(ctx, l.Key()) // the hold is lost (noticed at once on a real server, at the release on miniredis)
			if err := l.TryDo(ctx, func(context.Context) error { return nil }); !errors.Is(err, redislock.ErrLocked) {
				t.Errorf("TryDo() during another goroutine's Do = %v, want ErrLocked", err)
			}
			return nil
		})
		if !errors.Is(err, redislock.ErrLost) && !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("Do() = %v, want the loss", err)
		}
		ran := false
		if err := l.TryDo(ctx, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
			t.Fatalf("TryDo() after the Do = %v (ran %v), want nil", err, ran)
		}
	})
}
