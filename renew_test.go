package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// renewers counts the auto-renewal goroutines that the calling goroutine
// started (its Acquire started them) and that exist right now, whether or
// not they have started running: the tests that call it hold their locks
// from their own goroutine, and may run beside other tests' renewals.
func renewers() int {
	buf := make([]byte, 64)
	self, _, _ := strings.Cut(strings.TrimPrefix(string(buf[:runtime.Stack(buf, false)]), "goroutine "), " ")
	return strings.Count(allStacks(), "hold.(*Hold).StartRenewal in goroutine "+self+"\n")
}

// doneWithin waits for l.Done() to close, failing t after d; it returns
// when it closed.
func doneWithin(t *testing.T, l *redislock.Lock, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-l.Done():
		return time.Now()
	case <-time.After(d):
		t.Fatalf("Done() not closed within %v (Err() = %v)", d, l.Err())
		return time.Time{}
	}
}

// With auto-renewal a 600 ms lock survives five expires holding our id;
// without it (the check's broken variant) the key is gone after one. (Each
// renewal has a third of the expire to be answered: 200 ms, which a loaded
// machine under -race meets.)
func TestAutoRenewalKeepsTheKey(t *testing.T) {
	quick(t)
	const expire = 600 * time.Millisecond
	for _, tc := range []struct {
		name      string
		renew     bool
		wantAlive bool
	}{
		{"renewed", true, true},
		{"broken/not renewed", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			quick(t)
			s, ctx, admin := started(t)
			opts := []redislock.Option{redislock.WithExpire(expire)}
			if tc.renew {
				opts = append(opts, redislock.WithAutoRenewal())
			}
			l := mustNew(t, s.Client(), "job", opts...)
			mustAcquire(t, ctx, l)
			end := time.Now().Add(5 * expire)
			alive := true
			for time.Now().Before(end) && alive {
				got, err := admin.Get(ctx, l.Key()).Result()
				switch {
				case errors.Is(err, redis.Nil):
					alive = false
				case err != nil:
					t.Fatal(err)
				case got != l.ID():
					t.Fatalf("key holds %q, want our id %q", got, l.ID())
				}
				time.Sleep(5 * time.Millisecond) // sampling rate of the observer
			}
			if alive != tc.wantAlive {
				t.Fatalf("key alive through 5 expires = %v, want %v", alive, tc.wantAlive)
			}
			if tc.renew {
				select {
				case <-l.Done():
					t.Fatalf("Done() closed while renewed: %v", l.Err())
				default:
				}
				if err := l.Release(ctx); err != nil {
					t.Fatalf("Release() = %v", err)
				}
			} else {
				doneWithin(t, l, time.Second)
				if err := l.Err(); !errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrExpired) {
					t.Fatalf("Err() after local expiry = %v, want ErrLost, ErrExpired", err)
				}
			}
			if n := renewers(); n != 0 {
				t.Fatalf("%d renewal goroutines left", n)
			}
		})
	}
}

// The key is deleted, or taken by another owner, under a renewed hold:
// Done closes within one renewal interval, Err says why, and the other
// owner's key is never touched.
func TestLossIsReported(t *testing.T) {
	quick(t)
	// 3 s: the renewal (at 2 s) must find the loss well before the read
	// shortly before the local deadline (2.94 s) would, which covers for a
	// renewal that ignores it.
	const expire = 3 * time.Second
	const interval = expire * 2 / 3
	for _, tc := range []struct {
		name   string
		steal  func(ctx context.Context, c *redis.Client, key string) error
		reason error
	}{
		{"deleted", func(ctx context.Context, c *redis.Client, key string) error {
			return c.Del(ctx, key).Err()
		}, redislock.ErrExpired},
		{"taken", func(ctx context.Context, c *redis.Client, key string) error {
			return c.Set(ctx, key, "other-owner", 10*time.Second).Err()
		}, redislock.ErrTakenOver},
	} {
		t.Run(tc.name, func(t *testing.T) {
			quick(t)
			s, ctx, admin := started(t)
			// Without tracking, which would notice the loss first: this is
			// about what the renewal finds (tracking_test.go has the rest).
			l := mustNew(t, s.Client(), "job", redislock.WithExpire(expire), redislock.WithAutoRenewal(), redislock.WithTracking(false))
			mustAcquire(t, ctx, l)
			if err := l.Err(); err != nil {
				t.Fatalf("Err() while held = %v, want nil", err)
			}
			stolen := time.Now()
			if err := tc.steal(ctx, admin, l.Key()); err != nil {
				t.Fatal(err)
			}
			took := doneWithin(t, l, 5*time.Second).Sub(stolen)
			t.Logf("loss noticed after %v (renewal interval %v)", took, interval)
			if took > interval+500*time.Millisecond {
				t.Fatalf("loss noticed after %v, want within one renewal interval (%v)", took, interval)
			}
			err := l.Err()
			if !errors.Is(err, redislock.ErrLost) || !errors.Is(err, tc.reason) {
				t.Fatalf("Err() = %v, want ErrLost and %v", err, tc.reason)
			}
			if again := l.Err(); again.Error() != err.Error() {
				t.Fatalf("Err() changed from %v to %v", err, again)
			}
			// The renewal goroutine has exited: nothing is renewed again.
			deadline := time.Now().Add(time.Second)
			for renewers() != 0 {
				if time.Now().After(deadline) {
					t.Fatal("renewal goroutine still running after loss")
				}
				time.Sleep(time.Millisecond)
			}
			if tc.reason == redislock.ErrTakenOver {
				if got := admin.Get(ctx, l.Key()).Val(); got != "other-owner" {
					t.Fatalf("other owner's key = %q", got)
				}
				if ttl := admin.PTTL(ctx, l.Key()).Val(); ttl <= expire {
					t.Fatalf("other owner's PTTL = %v: it was renewed with our expire", ttl)
				}
			} else if admin.Exists(ctx, l.Key()).Val() != 0 {
				t.Fatal("the deleted key was recreated")
			}
			if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
				t.Fatalf("Release() after loss = %v, want ErrNotAcquired", err)
			}
			// A lost hold does not block a new acquire.
			if tc.reason == redislock.ErrExpired {
				if err := l.Acquire(ctx); err != nil {
					t.Fatalf("Acquire() after loss = %v", err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// The server dies under a renewed hold: Done closes no later than the
// expire counted from the acquire, and the goroutine exits. In the broken
// variant the key's TTL is cut short behind the Lock's back, as a local
// deadline that ran past the key's would be: the same check finds Done
// closing long after the key could have expired.
func TestServerKilledDuringRenewedHold(t *testing.T) {
	long(t, "kills the server under a hold")
	const expire = 600 * time.Millisecond
	for _, tc := range []struct {
		name       string
		lockExpire time.Duration // what the Lock believes
		broken     bool
	}{
		{"renewed", expire, false},
		{"broken/local deadline past the key's", 3 * expire, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			l := mustNew(t, s.Client(func(o *redis.Options) {
				o.MaxRetries = -1
				o.DialTimeout = 100 * time.Millisecond
			}), "job", redislock.WithExpire(tc.lockExpire), redislock.WithAutoRenewal())
			sent := time.Now()
			mustAcquire(t, ctx, l)
			if tc.broken {
				if err := s.Client().PExpire(ctx, l.Key(), expire).Err(); err != nil {
					t.Fatal(err)
				}
			}
			s.Kill()
			closed := doneWithin(t, l, 5*time.Second)
			t.Logf("Done() after %v; the key expires %v after the acquire", closed.Sub(sent), expire)
			// Timer slack on a loaded machine: 150 ms.
			if inTime := !closed.After(sent.Add(expire + 150*time.Millisecond)); inTime == tc.broken {
				t.Fatalf("Done() closed %v after the acquire was sent; want by the key's expire (%v) = %v", closed.Sub(sent), expire, !tc.broken)
			}
			err := l.Err()
			if !errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrUnreachable) {
				t.Fatalf("Err() = %v, want ErrLost and ErrUnreachable", err)
			}
			deadline := time.Now().Add(time.Second)
			for renewers() != 0 {
				if time.Now().After(deadline) {
					t.Fatal("renewal goroutine still running after loss")
				}
				time.Sleep(time.Millisecond)
			}
			if err := l.Release(ctx); err == nil {
				t.Fatal("Release() with the server down = nil, want an error")
			}
		})
	}
}

// The local deadline runs out no later than the key: Done closes at the
// expire counted from when the acquire (or the Extend) was sent, which is
// before Redis set the key's TTL. Each hold's lateness is measured against
// a lower bound of its key's expiry (the call was made after before, so
// Redis set the TTL after it); the smallest of five leaves out timer and
// scheduling noise, while a deadline set past the key's shows in all five.
func TestLocalDeadlineNotAfterTheKey(t *testing.T) {
	t.Parallel()
	const expire, samples, slack = 200 * time.Millisecond, 5, 50 * time.Millisecond
	for _, tc := range []struct {
		name  string
		start func(ctx context.Context, t *testing.T, c *redis.Client, name string) (*redislock.Lock, time.Time)
	}{
		{"acquire", func(ctx context.Context, t *testing.T, c *redis.Client, name string) (*redislock.Lock, time.Time) {
			// Without tracking, which would see the key expire and cover
			// up a deadline that runs late.
			l := mustNew(t, c, name, redislock.WithExpire(expire), redislock.WithTracking(false))
			before := time.Now()
			mustAcquire(t, ctx, l)
			return l, before
		}},
		{"extend", func(ctx context.Context, t *testing.T, c *redis.Client, name string) (*redislock.Lock, time.Time) {
			// No margin: a 200 ms Extend is within the default margin of
			// a 1 min expire (602 ms), and the deadline itself is measured.
			l := mustNew(t, c, name, redislock.WithExpire(time.Minute), redislock.WithSafetyMargin(0), redislock.WithTracking(false))
			mustAcquire(t, ctx, l)
			before := time.Now()
			if err := l.Extend(ctx, expire); err != nil {
				t.Fatalf("Extend() = %v", err)
			}
			return l, before
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			c := s.Client()
			late := time.Duration(math.MaxInt64)
			for i := range samples {
				l, before := tc.start(ctx, t, c, fmt.Sprintf("job-%d", i))
				closed := doneWithin(t, l, 5*time.Second)
				late = min(late, closed.Sub(before.Add(expire)))
			}
			t.Logf("Done() closed at least %v after the earliest the key could expire", late)
			if late > slack {
				t.Fatalf("Done() closed %v after the earliest the key could expire (best of %d), want within %v", late, samples, slack)
			}
		})
	}
}

// Renewal runs on a context of its own: the end of the context Acquire was
// given (a request that finished) does not stop it.
func TestRenewalOutlivesCallersContext(t *testing.T) {
	t.Parallel()
	// Each renewal has a third of the expire to be answered: 300 ms, which
	// a loaded machine under -race meets (100 ms it did not, 1 run in 5).
	const expire = 900 * time.Millisecond
	s, ctx, admin := started(t)
	l := mustNew(t, s.Client(), "job", redislock.WithExpire(expire), redislock.WithAutoRenewal())
	actx, cancel := context.WithCancel(ctx)
	mustAcquire(t, actx, l)
	cancel()
	select {
	case <-l.Done():
		t.Fatalf("Done() closed after the Acquire's context ended: %v", l.Err())
	case <-time.After(3 * expire):
	}
	if got := admin.Get(ctx, l.Key()).Val(); got != l.ID() {
		t.Fatalf("lock key = %q three expires after the Acquire's context ended, want our id", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() = %v", err)
	}
}

// Release returns only after the renewal goroutine has exited.
func TestReleaseJoinsRenewal(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	for i := 0; i < 20; i++ {
		// An expire the hold outlives between Acquire and Release on a
		// loaded machine (30 ms did not, 1 run in 3 under -race and load).
		l := mustNew(t, s.Client(), "job", redislock.WithExpire(2*time.Second), redislock.WithAutoRenewal())
		mustAcquire(t, ctx, l)
		if n := renewers(); n != 1 {
			t.Fatalf("renewal goroutines while held = %d, want 1", n)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Release has waited for the goroutine's last act (closing its done
		// channel); the runtime may take a moment more to retire it.
		for deadline := time.Now().Add(200 * time.Millisecond); renewers() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("renewal goroutine still there 200ms after Release")
			}
		}
		if err := l.Err(); !errors.Is(err, redislock.ErrReleased) {
			t.Fatalf("Err() after Release = %v, want ErrReleased", err)
		}
	}
}

// A Lock dropped while holding stops renewing once collected, and its key
// then expires. Kept reachable (the broken variant of the check), it goes
// on renewing and the key lives.
func TestDroppedLockStopsRenewing(t *testing.T) {
	quick(t)
	// A third of the expire for each renewal to be answered, 400 ms: the
	// kept Lock must keep renewing for 3 s on a loaded machine.
	const expire = 1200 * time.Millisecond
	for _, keep := range []bool{false, true} {
		name := "dropped"
		if keep {
			name = "broken/kept reachable"
		}
		t.Run(name, func(t *testing.T) {
			quick(t)
			s, ctx, admin := started(t)
			var kept *redislock.Lock
			key := func() string {
				l := mustNew(t, s.Client(), "job", redislock.WithExpire(expire), redislock.WithAutoRenewal())
				mustAcquire(t, ctx, l)
				if keep {
					kept = l
				}
				return l.Key()
			}()
			deadline := time.Now().Add(3 * time.Second)
			for renewers() != 0 && time.Now().Before(deadline) {
				runtime.GC()
				time.Sleep(5 * time.Millisecond)
			}
			stillRenewing := renewers() != 0
			if stillRenewing != keep {
				t.Fatalf("renewing after GC = %v, want %v", stillRenewing, keep)
			}
			gone := time.Now().Add(2 * expire)
			for admin.Exists(ctx, key).Val() != 0 && time.Now().Before(gone) {
				time.Sleep(10 * time.Millisecond)
			}
			if alive := admin.Exists(ctx, key).Val() != 0; alive != keep {
				t.Fatalf("key alive 2 expires after the collection = %v, want %v", alive, keep)
			}
			if keep {
				if err := kept.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Dropped means unreachable, and a local variable is unreachable after
// its last use, not at the end of its function: a job that acquires and
// never uses its Lock again loses the renewal at the next collection while
// it still runs, and its key expires under it. A deferred Release uses the
// Lock at the end, so the hold renews for the whole job.
func TestDeferredReleaseKeepsTheLockThroughTheJob(t *testing.T) {
	quick(t)
	const expire = 1200 * time.Millisecond
	andBroken(t, "deferred Release", "no use after Acquire", func(t *testing.T, broken bool) {
		s, ctx, admin := started(t)
		// The job: 3 s of collections, then is the key still there?
		job := func() bool {
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
				runtime.GC()
				time.Sleep(5 * time.Millisecond)
			}
			return admin.Exists(ctx, "lock:job").Val() == 1
		}
		var kept bool
		if broken {
			kept = jobWithoutRelease(t, ctx, s.Client(), expire, job)
		} else {
			kept = jobWithDeferredRelease(t, ctx, s.Client(), expire, job)
		}
		if kept == broken {
			t.Fatalf("key there after a 3 s job of collections (expire %v) = %v, want %v", expire, kept, !broken)
		}
	})
}

// jobWithDeferredRelease and jobWithoutRelease acquire a renewed Lock and
// run job (they differ only in the defer; two functions, so that the
// compiler's liveness of l is each one's own).
func jobWithDeferredRelease(t *testing.T, ctx context.Context, c *redis.Client, expire time.Duration, job func() bool) bool {
	l := mustNew(t, c, "job", redislock.WithExpire(expire), redislock.WithAutoRenewal())
	mustAcquire(t, ctx, l)
	defer l.Release(ctx)
	return job()
}

func jobWithoutRelease(t *testing.T, ctx context.Context, c *redis.Client, expire time.Duration, job func() bool) bool {
	l := mustNew(t, c, "job", redislock.WithExpire(expire), redislock.WithAutoRenewal())
	mustAcquire(t, ctx, l)
	return job()
}

func TestDoneErrContract(t *testing.T) {
	quick(t)
	b := miniBackend(t)
	ctx := ctxT(t)
	l := mustNew(t, b.client(), "job", redislock.WithExpire(150*time.Millisecond))

	select {
	case <-l.Done():
	default:
		t.Fatal("Done() before the first acquire is open, want closed")
	}
	if err := l.Err(); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("Err() before the first acquire = %v, want ErrNotAcquired", err)
	}

	mustAcquire(t, ctx, l)
	d1 := l.Done()
	if d2 := l.Done(); d1 != d2 {
		t.Fatal("Done() returned two channels for one hold")
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err() while held = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-d1
	if err := l.Err(); !errors.Is(err, redislock.ErrReleased) {
		t.Fatalf("Err() after Release = %v, want ErrReleased", err)
	}

	// Without auto-renewal Done closes when the expire runs out locally
	// (miniredis's clock is not moved: the local clock decides).
	start := time.Now()
	mustAcquire(t, ctx, l)
	if l.Done() == d1 {
		t.Fatal("a new hold reuses the old Done channel")
	}
	closed := doneWithin(t, l, 2*time.Second)
	if took := closed.Sub(start); took < 140*time.Millisecond || took > time.Second {
		t.Fatalf("Done() closed %v after acquire, want at the 150ms expire", took)
	}
	err := l.Err()
	if !errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrExpired) {
		t.Fatalf("Err() = %v, want ErrLost, ErrExpired", err)
	}

	// Extend moves the local deadline too.
	l2 := mustNew(t, b.client(), "job2", redislock.WithExpire(100*time.Millisecond))
	mustAcquire(t, ctx, l2)
	if err := l2.Extend(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l2.Done():
		t.Fatalf("Done() closed despite Extend: %v", l2.Err())
	case <-time.After(300 * time.Millisecond):
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMaxHold(t *testing.T) {
	t.Parallel()
	// 200 ms for each renewal to be answered, on a loaded machine.
	const expire, maxHold = 600 * time.Millisecond, 1800 * time.Millisecond
	s, ctx, admin := started(t)
	l := mustNew(t, s.Client(), "job", redislock.WithExpire(expire), redislock.WithAutoRenewal(), redislock.WithMaxHold(maxHold))
	start := time.Now()
	mustAcquire(t, ctx, l)
	closed := doneWithin(t, l, 5*time.Second)
	took := closed.Sub(start)
	t.Logf("max hold %v: Done() after %v", maxHold, took)
	if took < maxHold-expire || took > maxHold+300*time.Millisecond {
		t.Fatalf("Done() after %v, want about the max hold %v", took, maxHold)
	}
	if err := l.Err(); !errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrMaxHold) {
		t.Fatalf("Err() = %v, want ErrLost, ErrMaxHold", err)
	}
	gone := time.Now().Add(200 * time.Millisecond)
	for admin.Exists(ctx, l.Key()).Val() != 0 {
		if time.Now().After(gone) {
			t.Fatal("key still exists after the max hold")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDo(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	l := mustNew(t, s.Client(), "job", redislock.WithExpire(600*time.Millisecond), redislock.WithAutoRenewal())

	// fn runs under the lock, which is released afterwards; fn's error is
	// returned.
	errJob := errors.New("job failed")
	err := l.Do(ctx, func(ctx context.Context) error {
		if got := admin.Get(ctx, l.Key()).Val(); got != l.ID() {
			t.Errorf("inside Do the key holds %q, want %q", got, l.ID())
		}
		return errJob
	})
	if !errors.Is(err, errJob) || admin.Exists(ctx, l.Key()).Val() != 0 {
		t.Fatalf("Do() = %v (key exists %d), want errJob and the key released", err, admin.Exists(ctx, l.Key()).Val())
	}

	// The lock is lost mid-fn: fn's context is cancelled with ErrLost, and
	// fn's error reaches the caller; the release, which finds the key
	// gone, adds nothing (the loss says why it is not held).
	started := make(chan struct{})
	go func() {
		<-started
		admin.Del(ctx, l.Key())
	}()
	err = l.Do(ctx, func(ctx context.Context) error {
		close(started)
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(5 * time.Second):
			return errors.New("fn's context was not cancelled on loss")
		}
	})
	if !errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrExpired) || errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("Do() with loss = %v, want ErrLost and ErrExpired (from fn), not the release's ErrNotAcquired", err)
	}

	// TryDo skips a busy lock without running fn.
	other := mustNew(t, s.Client(), "job")
	mustAcquire(t, ctx, other)
	ran := false
	if err := l.TryDo(ctx, func(context.Context) error { ran = true; return nil }); !errors.Is(err, redislock.ErrLocked) || ran {
		t.Fatalf("TryDo() on a busy lock = %v (fn ran %v), want ErrLocked without running", err, ran)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.TryDo(ctx, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("TryDo() on a free lock = %v (fn ran %v)", err, ran)
	}

	// A panic in fn still releases the lock.
	func() {
		defer func() { recover() }()
		l.Do(ctx, func(context.Context) error { panic("boom") })
	}()
	if admin.Exists(ctx, l.Key()).Val() != 0 {
		t.Fatal("lock still held after fn panicked")
	}
}

// noLock is the broken variant of a sync.Locker: it locks nothing.
type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}

// The sync.Locker adapter gives mutual exclusion between goroutines with
// separate clients, and between goroutines sharing one Lock: 240
// non-atomic increments, none lost. With lockers that lock nothing (the
// broken variant) the same goroutines lose updates.
func TestLockerCounter(t *testing.T) {
	quick(t)
	const workers, rounds = 24, 10
	andBroken(t, "locker", "no lock", func(t *testing.T, broken bool) {
		s, ctx, _ := started(t)
		data := s.Client()
		shared := mustNew(t, s.Client(), "counter", redislock.WithExpire(5*time.Second))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := 0; w < workers; w++ {
			var mu sync.Locker
			switch {
			case broken:
				mu = noLock{}
			case w%2 == 0:
				mu = mustNew(t, s.Client(), "counter", redislock.WithExpire(5*time.Second)).Locker()
			default:
				mu = shared.Locker() // these take turns locally first
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < rounds; i++ {
					mu.Lock()
					n, _ := data.Get(ctx, "count").Int()
					data.Set(ctx, "count", n+1, 0)
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		got, _ := data.Get(ctx, "count").Int()
		t.Logf("counter = %d of %d", got, workers*rounds)
		if (got == workers*rounds) == broken {
			t.Fatalf("counter = %d of %d; want no lost update = %v", got, workers*rounds, !broken)
		}
	})
}

func TestLockerUnlockPanics(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	l := mustNew(t, s.Client(), "job", redislock.WithExpire(5*time.Second))
	mu := l.Locker()

	panicMsg := func(f func()) (msg string) {
		defer func() {
			if r := recover(); r != nil {
				msg, _ = r.(string)
			}
		}()
		f()
		return ""
	}
	if msg := panicMsg(mu.Unlock); !strings.Contains(msg, "Unlock of unlocked lock") {
		t.Fatalf("Unlock() without Lock panicked with %q", msg)
	}
	mu.Lock()
	s.Client().Del(ctx, l.Key()) // the lock is lost
	if msg := panicMsg(mu.Unlock); !strings.Contains(msg, "no longer held") {
		t.Fatalf("Unlock() after loss panicked with %q, want \"no longer held\"", msg)
	}
	// The adapter is usable again.
	mu.Lock()
	mu.Unlock()
}
