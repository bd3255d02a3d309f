package redislock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// One *Lock shared by goroutines behaves as a sync.Mutex: they take turns
// (never two inside, none refused), a goroutine that acquires again while
// it holds waits, TryAcquire finds a held Lock busy, and a hold that was
// lost keeps the turn until its Release, so that Release can never free
// another goroutine's hold.
func TestSharedLockIsAMutex(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
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
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
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

// A first release that fails (not sent) keeps the *Lock's turn while
// Locker's Unlock retries: the goroutine waiting in Lock gets the lock
// once the key is freed, not when a key that never expires would.
func TestLockerRetriesTheReleaseUnderItsTurn(t *testing.T) {
	b := realBackend(t)
	c := b.client()
	var failed atomic.Bool
	c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if scriptOf(cmd) == "release" && failed.CompareAndSwap(false, true) {
			err := errors.New("i/o timeout (injected: the release was not sent)")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}))
	l := mustNew(t, c, "job", redislock.WithExpire(0))
	m := l.Locker()
	m.Lock()
	got := make(chan struct{})
	go func() { m.Lock(); close(got) }()
	blockedIn(t, "redislock.(*core).runQueued") // B waits for the turn
	m.Unlock()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatalf("B's Lock() still waiting 10 s after Unlock (key %q)", b.client().Get(context.Background(), l.Key()).Val())
	}
	if !failed.Load() {
		t.Fatal("the injected release failure never happened")
	}
	m.Unlock()
}

// A stray Release from another goroutine never makes this goroutine's
// Acquire fail: it waits its turn or goes ahead, and ErrAlreadyAcquired
// (a caller-given id in the key) never comes from a race on one *Lock.
func TestStrayReleaseNeverFailsAnAcquire(t *testing.T) {
	b := miniBackend(t)
	ctx := ctxT(t)
	l := mustNew(t, b.client(), "job", redislock.WithExpire(time.Minute))
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			l.Release(ctx)
		}
	}()
	defer func() { stop.Store(true); <-done }()
	for i := range 300 {
		if err := l.Acquire(ctx); err != nil {
			t.Fatalf("Acquire() %d beside a stray Release = %v, want nil", i, err)
		}
		l.Release(ctx) // nil, or ErrNotAcquired when the stray one came first
	}
}

// A hold that another goroutine's Release ends the moment it starts,
// before the Acquire that took it has returned, gives the Lock's turn back
// once: the Acquire returns, and the Lock goes on taking turns. (Found by
// the soak, 1 run in 10: the Acquire read "no hold has the turn" after the
// other goroutine had given it back, and gave it back a second time,
// taking the token of a stray idle Release, which then waited for ever in
// TestStrayReleaseNeverFailsAnAcquire.) The other Release is run from the
// observer's AcquireEnd, which comes just before Acquire returns.
func TestHoldReleasedAsItStartsGivesTheTurnBackOnce(t *testing.T) {
	quick(t)
	b := miniBackend(t)
	ctx := ctxT(t)
	var l *redislock.Lock
	var once sync.Once
	obs := &redislock.Observer{AcquireEnd: func(_ context.Context, e redislock.Event) {
		if e.Err != nil {
			return
		}
		once.Do(func() {
			done := make(chan error, 1)
			go func() { done <- l.Release(ctx) }()
			if err := <-done; err != nil {
				t.Errorf("the other goroutine's Release() = %v", err)
			}
		})
	}}
	l = mustNew(t, b.client(), "job", redislock.WithObserver(obs))
	returnsNil(t, "Acquire() (it gave the turn back a second time, and waited for it)", func() error { return l.Acquire(ctx) })
	// One turn, as before: a second goroutine's Acquire waits while the
	// next hold is held, and goes ahead at its Release.
	mustAcquire(t, ctx, l)
	secondAcquireWaits(t, ctx, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, ctx, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// An observer that panics in AcquireEnd after a successful acquire leaves
// the hold with its turn: another Acquire waits (ErrLocked at its
// deadline), and the hold's Release returns and lets the next one in.
func TestObserverPanicAfterAcquireKeepsTheTurnWithTheHold(t *testing.T) {
	b := miniBackend(t)
	ctx := ctxT(t)
	var once sync.Once
	obs := &redislock.Observer{AcquireEnd: func(_ context.Context, e redislock.Event) {
		if e.Err == nil {
			once.Do(func() { panic("observer bug") })
		}
	}}
	l := mustNew(t, b.client(), "job", redislock.WithObserver(obs))
	func() {
		defer func() { recover() }()
		l.Acquire(ctx)
	}()
	if l.Err() != nil {
		t.Fatalf("Err() after the panic = %v, want nil (held)", l.Err())
	}
	secondAcquireWaits(t, ctx, l)
	returnsNil(t, "Release()", func() error { return l.Release(ctx) })
	mustAcquire(t, ctx, l)
}

// Unlock whose release ran in Redis but went unanswered, and whose check
// of the key got no answer either, retries the release under its turn;
// the retry finds the key free (the first one freed it) and Unlock
// returns, without the panic that Unlock of an unheld lock gets.
func TestLockerUnlockWhoseReplyWasLost(t *testing.T) {
	b := realBackend(t)
	c := b.client()
	cacheScripts(t, c) // the first release's EVALSHA runs (not a NOSCRIPT)
	// 0: the first release runs, its reply lost; 1: Redis answers nothing
	// until Unlock's next release; 2: all goes through.
	var phase atomic.Int32
	c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		release := scriptOf(cmd) == "release"
		switch p := phase.Load(); {
		case p == 0 && release:
			phase.Store(1)
			if err := next(ctx, cmd); err != nil { // it runs: the key is freed
				return err
			}
		case p == 1 && release:
			phase.Store(2)
			return next(ctx, cmd)
		case p == 1:
		default:
			return next(ctx, cmd)
		}
		err := errors.New("read: connection reset by peer (injected: no answer)")
		cmd.SetErr(err)
		return err
	}))
	l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
	m := l.Locker()
	m.Lock()
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Unlock whose first release went unanswered panicked: %v", r)
			}
		}()
		m.Unlock()
	}()
	if phase.Load() != 2 {
		t.Fatalf("phase %d after Unlock: Unlock did not retry its release", phase.Load())
	}
	if n := b.client().Exists(context.Background(), l.Key()).Val(); n != 0 {
		t.Fatal("the key is still there after Unlock")
	}
	m.Lock() // the Lock is usable again
	m.Unlock()
}

// A goroutine that releases the Lock inside its own Do lets the next
// goroutine in; when that Do then returns, it gives back no turn but its
// own: a third goroutine still finds the Lock taken by the second.
func TestDoWhoseHoldWasReleasedKeepsTheNextHoldersTurn(t *testing.T) {
	b := miniBackend(t)
	ctx := ctxT(t)
	l := mustNew(t, b.client(), "job", redislock.WithExpire(time.Minute))
	second := make(chan error, 1)
	err := l.Do(ctx, func(fctx context.Context) error {
		go func() { second <- l.Acquire(ctx) }() // not fctx: it ends with the Do's hold
		if err := l.Release(fctx); err != nil {
			return err
		}
		if err := <-second; err != nil { // the second goroutine holds now
			t.Errorf("the second goroutine's Acquire = %v", err)
		}
		return nil
	})
	if t.Failed() {
		t.FailNow()
	}
	if err != nil && !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("Do = %v", err)
	}
	if err := l.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("a third goroutine's TryAcquire while the second holds = %v, want ErrLocked", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("the second goroutine's Release = %v", err)
	}
}

// secondAcquireWaits fails t unless an Acquire of l, held, waits its turn:
// ErrLocked at the end of a 50 ms context.
func secondAcquireWaits(t *testing.T, ctx context.Context, l *redislock.Lock) {
	t.Helper()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := l.Acquire(short); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("a second Acquire while held = %v, want ErrLocked at its deadline", err)
	}
}

// returnsNil fails t unless call, run in a goroutine of its own, returns
// nil within 5 s; what names it.
func returnsNil(t *testing.T, what string, call func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s = %v", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still blocked after 5 s", what)
	}
}
