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
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// warmLock returns a Lock on c whose scripts are all cached in Redis (so a
// dropped reply drops the reply of a command that ran, not of a NOSCRIPT),
// and holds it.
func warmLock(t *testing.T, ctx context.Context, c *redis.Client, name string, opts ...redislock.Option) *redislock.Lock {
	t.Helper()
	l := mustNew(t, c, name, opts...)
	mustAcquire(t, ctx, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, ctx, l)
	return l
}

// A release whose reply is lost is retried by go-redis; the retry finds the
// key gone. While the hold is valid that can only be our own release, so
// Release reports success, Err says released, and the sync.Locker adapter
// does not panic. A key that another owner holds, or a hold already lost
// before the release, still gets ErrNotAcquired (the checks that catch a
// Release that would call every missing key released).
func TestLostReleaseReplyIsARelease(t *testing.T) {
	quick(t)
	s := redistest.Start(t)
	p := proxyTo(t, s)
	ctx := ctxT(t)
	admin := s.Client()
	c := clientVia(t, p)

	l := warmLock(t, ctx, c, "job", redislock.WithExpire(time.Minute))
	oldID := l.ID()
	p.DropNextReply()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() with its reply lost = %v, want nil", err)
	}
	if !errors.Is(l.Err(), redislock.ErrReleased) || admin.Exists(ctx, l.Key()).Val() != 0 {
		t.Fatalf("after the retried release Err() = %v, key exists %d; want ErrReleased and no key",
			l.Err(), admin.Exists(ctx, l.Key()).Val())
	}
	// The first attempt may yet run again much later (held by a network):
	// the Lock's next hold is under a fresh id, out of its reach.
	mustAcquire(t, ctx, l)
	if l.ID() == oldID {
		t.Fatalf("ID() unchanged after a retried release; want a fresh id")
	}
	if err := admin.Eval(ctx, "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
		[]string{l.Key()}, oldID).Err(); err != nil {
		t.Fatal(err)
	}
	if got := admin.Get(ctx, l.Key()).Val(); got != l.ID() {
		t.Fatalf("a late release under the old id left the key %q, want the new hold's %q", got, l.ID())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The same through Locker: Unlock must not panic.
	l2 := warmLock(t, ctx, c, "job2", redislock.WithExpire(time.Minute))
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mu := l2.Locker()
	mu.Lock()
	p.DropNextReply()
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Unlock() with its reply lost panicked: %v", r)
			}
		}()
		mu.Unlock()
	}()

	// Lock without expire: no local deadline, the key cannot expire.
	l3 := warmLock(t, ctx, c, "job3")
	p.DropNextReply()
	if err := l3.Release(ctx); err != nil {
		t.Fatalf("Release() without expire, reply lost = %v, want nil", err)
	}

	// Another owner's key: not ours, whatever the hold believes.
	l4 := warmLock(t, ctx, c, "job4", redislock.WithExpire(time.Minute))
	admin.Set(ctx, l4.Key(), "thief", time.Minute)
	if err := l4.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) || !errors.Is(l4.Err(), redislock.ErrTakenOver) {
		t.Fatalf("Release() of a taken key = %v (Err %v), want ErrNotAcquired and ErrTakenOver", err, l4.Err())
	}
	if admin.Get(ctx, l4.Key()).Val() != "thief" {
		t.Fatal("Release() changed another owner's key")
	}

	// The release wakes a waiter, which takes the lock before go-redis's
	// retry: the retry finds the waiter's id. Still our release.
	l7 := warmLock(t, ctx, c, "job7", redislock.WithExpire(time.Minute))
	waiter := mustNew(t, admin, "job7", redislock.WithExpire(time.Minute))
	got := acquireAsync(ctx, waiter)
	waitBlocked(t, admin, 1)
	p.DropNextReply()
	if err := l7.Release(ctx); err != nil {
		t.Fatalf("Release() with its reply lost, waiter woken = %v, want nil", err)
	}
	if r := receive(t, got); r.err != nil || admin.Get(ctx, l7.Key()).Val() != waiter.ID() {
		t.Fatalf("waiter's Acquire() = %v, key %q; want it to hold the lock", r.err, admin.Get(ctx, l7.Key()).Val())
	}

	// A Reset while the hold is valid, and no retry: the missing key is a
	// loss, not a release.
	l6 := warmLock(t, ctx, c, "job6", redislock.WithExpire(time.Minute))
	if _, err := l6.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l6.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) || !errors.Is(l6.Err(), redislock.ErrExpired) {
		t.Fatalf("Release() after Reset = %v (Err %v), want ErrNotAcquired and ErrExpired", err, l6.Err())
	}

	// A hold that ran out on the local clock: the key's absence is a loss.
	// Retried, too: the retry proves nothing once the deadline passed.
	l5 := warmLock(t, ctx, c, "job5", redislock.WithExpire(100*time.Millisecond))
	<-l5.Done()
	admin.Del(ctx, l5.Key())
	p.DropNextReply()
	if err := l5.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("retried Release() after the expire ran out = %v, want ErrNotAcquired", err)
	}
}

// Release does not wait beyond its context for a renewal stuck on a dead
// connection: stopping the renewal cancels its call, and the release does
// not wait for it. (Before, a renewal stuck for its whole budget, 1.5 s
// here, held Release up that long.) The new Acquire after it is not held up
// either.
func TestReleaseDoesNotWaitForStuckRenewal(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := proxyTo(t, s)
	ctx := ctxT(t)
	c := clientVia(t, p, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	renewalSent := make(chan struct{}) // closed when the first extend goes out
	var once sync.Once
	c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if scriptOf(cmd) == "extend" {
			once.Do(func() { close(renewalSent) })
		}
		return next(ctx, cmd)
	}))
	l := mustNew(t, c, "job", redislock.WithExpire(4500*time.Millisecond), redislock.WithAutoRenewal())
	mustAcquire(t, ctx, l)
	p.Blackhole(true)
	<-renewalSent // the renewal, 3 s in, goes into the blackhole with 1.5 s to live
	for deadline := time.Now().Add(time.Second); p.Held() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // wait until it is on the wire, its reply awaited
			t.Fatal("the renewal did not reach the proxy")
		}
	}

	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.Release(rctx)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Release() in a blackhole = %v, want DeadlineExceeded", err)
	}
	if took > 800*time.Millisecond {
		t.Fatalf("Release() with a 200 ms context took %v: it waited for the stuck renewal", took)
	}
	t.Logf("Release() with a 200 ms context, renewal stuck: returned in %v", took)
	actx, acancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer acancel()
	start = time.Now()
	if err := l.Acquire(actx); err == nil {
		t.Fatal("Acquire() in a blackhole = nil")
	}
	if took := time.Since(start); took > 800*time.Millisecond {
		t.Fatalf("Acquire() with a 200 ms context took %v", took)
	}
	p.Blackhole(false)
}

// failReleases fails the next n release scripts (two keys, two arguments)
// before they are sent, with an error that is not a Redis reply.
func failReleases(n *atomic.Int32) commandHook {
	return func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if scriptOf(cmd) == "release" && n.Add(-1) >= 0 {
			err := errors.New("injected: dial tcp: connection refused")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// A Release that got no reply (here: never sent) leaves the key as it was;
// the hold ends as unreachable, not released, and the next Release frees
// the key, though the Lock took a fresh id meanwhile. The same for
// Locker.Unlock, which retries. (A Release whose context had already ended
// is sent all the same: see TestReleaseWithAnEndedContextIsSent.)
func TestFailedReleaseCanBeRetried(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		admin := b.client()
		c := b.client()
		var fail atomic.Int32
		c.AddHook(failReleases(&fail))
		l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))

		mustAcquire(t, ctx, l)
		fail.Store(1)
		if err := l.Release(ctx); err == nil {
			t.Fatal("Release() with the connection refused = nil")
		}
		if err := l.Err(); !errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrUnreachable) {
			t.Fatalf("Err() after a Release that got no reply = %v, want ErrLost and ErrUnreachable", err)
		}
		if err := l.Release(ctx); err != nil || admin.Exists(ctx, l.Key()).Val() != 0 {
			t.Fatalf("second Release() = %v (key exists %d), want nil and the key gone", err, admin.Exists(ctx, l.Key()).Val())
		}

		mu := l.Locker()
		mu.Lock()
		fail.Store(1)
		mu.Unlock() // retries
		if n := admin.Exists(ctx, l.Key()).Val(); n != 0 {
			t.Fatal("Unlock() returned with the key still held")
		}
	})
}

// An acquire that too few replicas acknowledged is released at once; when
// that release gets no reply the Lock takes a fresh id (the release may
// still land late), and the next Release frees the key under the old one.
func TestUnacknowledgedAcquireWhoseReleaseFails(t *testing.T) {
	quick(t)
	s := redistest.Start(t) // no replica: WAIT 1 answers 0
	ctx := ctxT(t)
	admin := s.Client()
	c := s.Client()
	var fail atomic.Int32
	c.AddHook(failReleases(&fail))
	l := mustNew(t, c, "job", redislock.WithExpire(time.Minute), redislock.WithReplicaAck(1, 20*time.Millisecond))
	oldID := l.ID()
	fail.Store(1)
	if err := l.TryAcquire(ctx); !errors.Is(err, redislock.ErrNotReplicated) {
		t.Fatalf("TryAcquire() = %v, want ErrNotReplicated", err)
	}
	if l.ID() == oldID || admin.Get(ctx, l.Key()).Val() != oldID {
		t.Fatalf("after the failed release: id %q (was %q), key %q; want a fresh id and the key under the old one",
			l.ID(), oldID, admin.Get(ctx, l.Key()).Val())
	}
	if err := l.Release(ctx); err != nil || admin.Exists(ctx, l.Key()).Val() != 0 {
		t.Fatalf("Release() = %v (key exists %d), want the old key freed", err, admin.Exists(ctx, l.Key()).Val())
	}
}

// Release and Acquire wait for a pending giveback only as long as their
// context allows (here the giveback is stuck in a blackhole for 2 s).
func TestPendingGivebackWaitIsBoundedByContext(t *testing.T) {
	quick(t)
	s := redistest.Start(t)
	p := proxyTo(t, s)
	ctx := ctxT(t)
	c := clientVia(t, p, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
	mustAcquire(t, ctx, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	defer p.Blackhole(false)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := l.TryAcquire(tctx); err == nil {
		t.Fatal("TryAcquire() in a blackhole = nil")
	} // its giveback is now pending
	for _, call := range []struct {
		name string
		fn   func(context.Context) error
	}{{"Release", l.Release}, {"TryAcquire", l.TryAcquire}} {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		ended := make(chan error, 1)
		go func() { ended <- call.fn(cctx) }()
		var err error
		select {
		case err = <-ended:
		case <-time.After(10 * time.Second): // the giveback waits in the blackhole for good
			cancel()
			t.Fatalf("%s() with a 200 ms context and a giveback pending has not returned after 10 s", call.name)
		}
		cancel()
		if took := time.Since(start); err == nil || took > 800*time.Millisecond {
			t.Fatalf("%s() with a 200 ms context and a giveback pending = %v after %v, want an error within 800 ms", call.name, err, took)
		}
	}
}

// The idiom `defer l.Release(ctx)` with the context the acquire ran under,
// which has ended by then (past its deadline, or cancelled), releases the
// lock: the release is sent under a grace of its own, the key is deleted,
// the waiter is woken, and Release returns nil; the hold ends released,
// not "Redis did not answer". The same for every primitive's release.
func TestReleaseWithAnEndedContextIsSent(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	for _, how := range []string{"past its deadline", "cancelled"} {
		t.Run(how, func(t *testing.T) {
			l := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute))
			waiter := mustNew(t, s.Client(), "job")
			var actx context.Context
			var cancel context.CancelFunc
			if how == "cancelled" {
				actx, cancel = context.WithCancel(ctx)
			} else {
				actx, cancel = context.WithTimeout(ctx, time.Second)
			}
			mustAcquire(t, actx, l)
			w := acquireAsync(ctx, waiter)
			waitBlocked(t, admin, 1)
			if how == "cancelled" {
				cancel()
			} else {
				<-actx.Done()
			}
			defer cancel()
			if err := l.Release(actx); err != nil {
				t.Fatalf("Release(ended ctx) = %v, want nil: the release sent under its own grace", err)
			}
			if err := l.Err(); !errors.Is(err, redislock.ErrReleased) {
				t.Fatalf("Err() = %v, want ErrReleased", err)
			}
			if r := receive(t, w); r.err != nil {
				t.Fatalf("the waiter's Acquire() = %v, want it woken by the release", r.err)
			}
			if owner := admin.Get(ctx, l.Key()).Val(); owner != waiter.ID() {
				t.Fatalf("key holds %q, want the waiter's id", owner)
			}
			if err := waiter.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("semaphore", func(t *testing.T) {
		sem := mustSemaphore(t, s.Client(), "pool", 1)
		cctx, cancel := context.WithCancel(ctx)
		p, err := sem.Acquire(cctx)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := p.Release(cctx); err != nil {
			t.Fatalf("Semaphore.Release(ended ctx) = %v, want nil", err)
		}
		if n := admin.ZCard(ctx, sem.Key()).Val(); n != 0 {
			t.Fatalf("%d permits held after the release, want 0", n)
		}
	})
	t.Run("rwmutex", func(t *testing.T) {
		rw := mustRWMutex(t, s.Client(), "doc")
		cctx, cancel := context.WithCancel(ctx)
		if err := rw.Lock(cctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := rw.Unlock(cctx); err != nil {
			t.Fatalf("RWMutex.Unlock(ended ctx) = %v, want nil", err)
		}
		other := mustRWMutex(t, s.Client(), "doc")
		if err := other.TryLock(ctx); err != nil {
			t.Fatalf("another writer's TryLock() after the release = %v, want nil", err)
		}
		_ = other.Unlock(ctx)
	})
}
