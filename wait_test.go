package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// acquireAsync starts l.Acquire(ctx) and returns a channel that receives its
// error and the time it returned.
func acquireAsync(ctx context.Context, l *redislock.Lock) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		err := l.Acquire(ctx)
		ch <- acquired{err: err, at: time.Now()}
	}()
	return ch
}

type acquired struct {
	err error
	at  time.Time
}

// receive waits for an acquireAsync result, failing t after 20 s.
func receive(t *testing.T, ch <-chan acquired) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Acquire did not return within 20s")
		return acquired{}
	}
}

// A blocked waiter is woken by the release, long before its BLPOP slice
// would have ended. Without the signal (the broken variant, a raw DEL) the
// same waiter sleeps out its slice: the check can fail.
func TestReleaseWakesWaiter(t *testing.T) {
	t.Parallel()
	const slice = 1500 * time.Millisecond // the waiter's deadline caps its slice
	for _, tc := range []struct {
		name     string
		release  func(ctx context.Context, c *redis.Client, l *redislock.Lock) error
		wantFast bool
	}{
		{"release", func(ctx context.Context, _ *redis.Client, l *redislock.Lock) error { return l.Release(ctx) }, true},
		{"broken/delete without signal", func(ctx context.Context, c *redis.Client, l *redislock.Lock) error {
			return c.Del(ctx, l.Key()).Err()
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, admin := started(t)
			holder := mustNew(t, s.Client(), "job")
			mustAcquire(t, ctx, holder)
			waiter := mustNew(t, s.Client(), "job")
			wctx, cancel := context.WithTimeout(ctx, slice+time.Second)
			defer cancel()
			done := acquireAsync(wctx, waiter)
			waitBlocked(t, admin, 1)

			released := time.Now()
			if err := tc.release(ctx, admin, holder); err != nil {
				t.Fatal(err)
			}
			r := receive(t, done)
			if r.err != nil {
				t.Fatalf("waiter.Acquire() = %v", r.err)
			}
			woke := r.at.Sub(released)
			t.Logf("release -> waiter holding: %v", woke)
			if fast := woke < slice/2; fast != tc.wantFast {
				t.Fatalf("waiter held the lock %v after the release; want fast=%v (slice %v)", woke, tc.wantFast, slice)
			}
		})
	}
}

// A woken waiter whose take (the plain SET NX behind its BLPOP) finds the
// lock held, here by a holder that crashed after a stray signal woke the
// waiter, learns the holder's TTL (the acquire script is sent after the
// SET) and wakes when the key expires, not a whole slice later.
func TestWokenWaiterFindingTheLockTakenWaitsForItsTTL(t *testing.T) {
	quick(t)
	const ttl = 500 * time.Millisecond
	s, ctx, admin := started(t)
	holder := mustNew(t, s.Client(), "job", redislock.WithExpire(30*time.Second))
	mustAcquire(t, ctx, holder)
	waiter := mustNew(t, s.Client(), "job", redislock.WithExpire(30*time.Second))
	done := acquireAsync(ctx, waiter)
	waitBlocked(t, admin, 1)
	// The holder "crashes" with ttl left, and a stray signal wakes the
	// waiter while the key is still there.
	if err := admin.PExpire(ctx, "lock:job", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := admin.LPush(ctx, "lock-signal:job", "1").Err(); err != nil {
		t.Fatal(err)
	}
	acquiredAtTTL(t, receive(t, done), start, ttl, "the stray signal")
}

// acquiredAtTTL fails t unless r is an acquisition that came when a key
// with ttl left at start expired (within a second after, 50 ms of clock
// grain before), not sooner and not a slice or an expire later.
func acquiredAtTTL(t *testing.T, r acquired, start time.Time, ttl time.Duration, since string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("waiter.Acquire() = %v", r.err)
	}
	took := r.at.Sub(start)
	t.Logf("%s -> waiter holding: %v (the key had %v left)", since, took, ttl)
	if took < ttl-50*time.Millisecond || took > ttl+time.Second {
		t.Fatalf("waiter acquired %v after %s, want within [ttl, ttl+1s] = [%v, %v]", took, since, ttl, ttl+time.Second)
	}
}

// A holder that dies without releasing: its waiters wake when its key
// expires (their slice is capped by its PTTL), not a slice or a whole
// expire of their own later.
func TestDeadHolderWaitersWakeAtItsTTL(t *testing.T) {
	quick(t)
	const ttl = 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		opts []redislock.Option
	}{
		{"waiter without expire", nil},
		{"waiter with a long expire", []redislock.Option{redislock.WithExpire(30 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			holder := mustNew(t, s.Client(), "job", redislock.WithExpire(ttl))
			start := time.Now()
			mustAcquire(t, ctx, holder)
			// The holder "crashes": it never releases.
			waiter := mustNew(t, s.Client(), "job", tc.opts...)
			wctx, cancel := context.WithTimeout(ctx, ttl+2*time.Second) // past the bound below
			defer cancel()
			acquiredAtTTL(t, receive(t, acquireAsync(wctx, waiter)), start, ttl, "the holder's acquire")
		})
	}
}

// A waiter's local deadline counts from when its winning try was sent,
// which for the try pipelined behind a BLPOP is up to a slice before Redis
// set the key; so a waiter's slices stay within a third of its own expire.
// A waiter with a 600 ms expire that waits 1.2 s behind a holder without
// expire then keeps the lock it gets for at least 400 ms (the test waits
// 150 ms), not "lost" at once while its key has most of its TTL left.
func TestLongWaitLeavesTheHoldItsExpire(t *testing.T) {
	quick(t)
	const expire = 600 * time.Millisecond
	s, ctx, admin := started(t)
	holder := mustNew(t, s.Client(), "job") // no expire: the waiter's slice is its own cap
	mustAcquire(t, ctx, holder)
	// The slice cap keeps the winning try recent: every BLPOP the waiter
	// sends blocks for a third of its expire at most. (Its hold would
	// also do without the cap, by reading its key, GET and PTTL, when
	// half the expire has gone by since the try was sent: see
	// Lock.freshen. So the BLPOPs are what is checked.)
	wc := s.Client()
	var mu sync.Mutex
	var longest time.Duration
	redislock.AddWaitHook(wc, pipelineHook(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		if args := cmds[0].Args(); cmds[0].Name() == "blpop" {
			secs, err := strconv.ParseFloat(fmt.Sprint(args[len(args)-1]), 64)
			if err != nil {
				t.Errorf("BLPOP timeout %v: %v", args[len(args)-1], err)
			}
			mu.Lock()
			longest = max(longest, time.Duration(secs*float64(time.Second)))
			mu.Unlock()
		}
		return next(ctx, cmds)
	}))
	waiter := mustNew(t, wc, "job", redislock.WithExpire(expire), redislock.WithTracking(false))
	done := acquireAsync(ctx, waiter)
	waitBlocked(t, admin, 1)
	time.Sleep(2 * expire) // the holder works on, longer than the waiter's expire
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := receive(t, done)
	if r.err != nil {
		t.Fatalf("waiter.Acquire() = %v", r.err)
	}
	mu.Lock()
	if longest == 0 || longest > expire/3 {
		t.Fatalf("the waiter's longest BLPOP blocked for %v, want a slice of at most a third of its expire (%v)", longest, expire/3)
	}
	mu.Unlock()
	ttl := admin.PTTL(ctx, waiter.Key()).Val()
	select {
	case <-waiter.Done():
		t.Fatalf("the hold ended %v after Acquire returned (%v) while its key had %v left, want it to last %v at least",
			time.Since(r.at), waiter.Err(), ttl, expire/4)
	case <-time.After(time.Until(r.at.Add(expire / 4))):
	}
	if err := waiter.Release(ctx); err != nil {
		t.Fatalf("waiter.Release() = %v", err)
	}
}

// A waiter whose script Redis no longer has (SCRIPT FLUSH, or a restart
// while it waited) is woken by the release and takes the lock: its try
// that got NOSCRIPT is sent again with EVAL.
func TestWaiterReloadsFlushedScripts(t *testing.T) {
	quick(t)
	// A plain Lock's woken try is a SET NX, but a fenced Lock's and a
	// permit's are scripts: the NOSCRIPT is theirs.
	for _, tc := range []struct {
		name string
		opts []redislock.Option
		sem  bool
	}{
		{"lock", nil, false},
		{"fenced lock", []redislock.Option{redislock.WithFencing()}, false},
		{"semaphore", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, admin := started(t)
			release, done := flushedScriptsWaiter(t, ctx, s, tc.sem, tc.opts)
			waitBlocked(t, admin, 1)
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			released := time.Now()
			if err := release(); err != nil {
				t.Fatalf("holder's Release() after SCRIPT FLUSH = %v", err)
			}
			heldSoonAfter(t, done, released, "the waiter, after SCRIPT FLUSH")
		})
	}
}

// flushedScriptsWaiter makes a holder of "job" (a Lock with opts, or a
// permit of a Semaphore of 1) and a waiter behind it, and returns the
// holder's release and the waiter's outcome.
func flushedScriptsWaiter(t *testing.T, ctx context.Context, s *redistest.Server, sem bool, opts []redislock.Option) (func() error, <-chan acquired) {
	t.Helper()
	if !sem {
		holder := mustNew(t, s.Client(), "job", opts...)
		mustAcquire(t, ctx, holder)
		return func() error { return holder.Release(ctx) }, acquireAsync(ctx, mustNew(t, s.Client(), "job", opts...))
	}
	newSem := func() *redislock.Semaphore {
		sm, err := redislock.NewSemaphore(s.Client(), "job", 1, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return sm
	}
	p, err := newSem().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiter := newSem()
	done := make(chan acquired, 1)
	go func() {
		q, err := waiter.Acquire(ctx)
		done <- acquired{err: err, at: time.Now()}
		if err == nil {
			_ = q.Release(context.Background())
		}
	}()
	return func() error { return p.Release(ctx) }, done
}

func TestResetWakesWaiter(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	holder := mustNew(t, s.Client(), "job")
	mustAcquire(t, ctx, holder)
	waiter := mustNew(t, s.Client(), "job")
	wctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	done := acquireAsync(wctx, waiter)
	waitBlocked(t, admin, 1)

	reset := time.Now()
	if _, err := mustNew(t, admin, "job").Reset(ctx); err != nil {
		t.Fatal(err)
	}
	heldSoonAfter(t, done, reset, "the waiter, after Reset")
	if err := holder.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("holder.Release() after Reset = %v, want ErrNotAcquired", err)
	}
}

func TestResetAllWakesWaiters(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	names := []string{"a", "b", "c"}
	var waits []<-chan acquired
	wctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	for i, name := range names {
		mustAcquire(t, ctx, mustNew(t, s.Client(), name))
		waits = append(waits, acquireAsync(wctx, mustNew(t, s.Client(), name)))
		waitBlocked(t, admin, i+1)
	}
	reset := time.Now()
	if n, err := redislock.ResetAll(ctx, admin); err != nil || n != 3 {
		t.Fatalf("ResetAll() = %d, %v; want 3, nil", n, err)
	}
	for i, ch := range waits {
		heldSoonAfter(t, ch, reset, "the waiter of "+names[i]+", after ResetAll")
	}
}

// Wake-ups cross the language boundary: a release done the way
// python-redis-lock's unlock script does it wakes our waiter, and our
// release wakes a waiter that BLPOPs the signal list as Python does.
func TestPythonProtocolWakeUps(t *testing.T) {
	s, ctx, _ := started(t)
	py := s.Client() // plays the Python process

	// Python holds (SET NX EX, its acquire), we wait.
	if !py.SetNX(ctx, "lock:shared", "python-id", 10*time.Second).Val() {
		t.Fatal("python SET NX failed")
	}
	waiter := mustNew(t, s.Client(), "shared")
	wctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	done := acquireAsync(wctx, waiter)
	waitBlocked(t, py, 1)
	released := time.Now()
	if _, err := py.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, "lock-signal:shared")
		p.LPush(ctx, "lock-signal:shared", 1)
		p.PExpire(ctx, "lock-signal:shared", time.Second)
		p.Del(ctx, "lock:shared")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	heldSoonAfter(t, done, released, "the Go waiter, after the Python release")

	// We hold, Python waits in BLPOP lock-signal:shared and wakes on our
	// release.
	popped := make(chan time.Time, 1)
	go func() {
		if err := py.BLPop(ctx, 5*time.Second, "lock-signal:shared").Err(); err == nil {
			popped <- time.Now()
		}
		close(popped)
	}()
	waitBlocked(t, py, 1)
	released = time.Now()
	if err := waiter.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at, ok := <-popped:
		if !ok || at.Sub(released) > time.Second {
			t.Fatalf("Python-style BLPOP after our release: popped %v after %v; want within 1s", ok, at.Sub(released))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Python-style waiter not woken")
	}
}

// faultHook fails the first BLPOP pipeline a client sends *after* Redis has
// run it, as a connection reset after the request would: the signal may
// have been popped and the try may have taken the lock, but the caller
// hears only an error. With dropGiveback it also refuses to send the
// giveback script (the broken variant).
type faultHook struct {
	armed        atomic.Bool
	dropGiveback bool
	fired        atomic.Int32
}

var errInjected = errors.New("injected fault: connection reset after the request was sent")

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.dropGiveback && scriptOf(cmd) == "giveback" {
			cmd.SetErr(errInjected)
			return errInjected
		}
		return next(ctx, cmd)
	}
}

func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !strings.EqualFold(cmds[0].Name(), "blpop") || !h.armed.Load() {
			return next(ctx, cmds)
		}
		if err := next(ctx, cmds); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if !h.armed.CompareAndSwap(true, false) {
			return nil
		}
		h.fired.Add(1)
		for _, cmd := range cmds {
			cmd.SetErr(errInjected)
		}
		return errInjected
	}
}

// A waiter whose wake-up reply is lost gives the lock and the signal back,
// so the next waiter is not left waiting: its lock would otherwise be
// orphaned (held by an id whose owner returned an error). The next waiter
// gets the lock at once, well within its 2 s slice; a giveback that freed
// the lock without pushing the signal would leave it to sleep out the
// slice, and without giveback (the broken variant) it never gets it.
func TestLostWakeUpReplyIsGivenBack(t *testing.T) {
	t.Parallel()
	const slice = 2 * time.Second // the longest BLPOP, on go-redis's default 3 s read timeout
	for _, tc := range []struct {
		name        string
		broken      bool
		wantHandoff bool
	}{
		{"giveback", false, true},
		{"broken/no giveback", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, admin := started(t)
			holder := mustNew(t, s.Client(), "job")
			mustAcquire(t, ctx, holder)

			// Retries off: a waiter whose wait connection fails tries
			// again on its client when that client retries; here it
			// gives up, and gives back.
			faulty := s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
			hook := &faultHook{dropGiveback: tc.broken}
			faulty.AddHook(hook)
			redislock.AddWaitHook(faulty, hook)
			hook.armed.Store(true)
			first := mustNew(t, faulty, "job")
			firstDone := acquireAsync(ctx, first)
			waitBlocked(t, admin, 1) // first in line: Redis serves BLPOP in FIFO order

			second := mustNew(t, s.Client(), "job")
			sctx, cancel := context.WithTimeout(ctx, slice+time.Second) // the slice is not cut by the deadline
			defer cancel()
			secondDone := acquireAsync(sctx, second)
			waitBlocked(t, admin, 2)

			released := time.Now()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if r := receive(t, firstDone); !errors.Is(r.err, errInjected) {
				t.Fatalf("first.Acquire() = %v, want the injected fault", r.err)
			}
			if hook.fired.Load() != 1 {
				t.Fatalf("fault fired %d times, want 1", hook.fired.Load())
			}
			r := receive(t, secondDone)
			took := r.at.Sub(released)
			t.Logf("release -> second waiter returned: %v (%v)", took, r.err)
			// At once: well within half the slice that a missing signal
			// would make it sleep out.
			if handedOff := r.err == nil && took < slice/2; handedOff != tc.wantHandoff {
				owner, _ := second.OwnerID(ctx)
				t.Fatalf("second.Acquire() = %v after %v (owner %q, first %q); want handed off within %v = %v",
					r.err, took, owner, first.ID(), slice/2, tc.wantHandoff)
			}
		})
	}
}

// With the client's retries on (go-redis's default), a waiter whose
// wake-up reply is lost tries again on its client, as go-redis retried the
// pair of commands: the try finds the lock its own and the Acquire does
// not fail. Its wait connection never retries the BLPOP by itself (a
// second BLPOP would pop another waiter's signal).
func TestLostWakeUpReplyIsRetried(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	holder := mustNew(t, s.Client(), "job")
	mustAcquire(t, ctx, holder)
	c := s.Client()
	hook := &faultHook{}
	redislock.AddWaitHook(c, hook)
	hook.armed.Store(true)
	waiter := mustNew(t, c, "job")
	done := acquireAsync(ctx, waiter)
	waitBlocked(t, s.Client(), 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, done); r.err != nil {
		t.Fatalf("Acquire() after a lost wake-up reply = %v, want nil: the wait is retried", r.err)
	}
	if n := hook.fired.Load(); n != 1 {
		t.Fatalf("fault fired %d times, want 1", n)
	}
	if err := waiter.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Mutual exclusion: many goroutines, each with its own client and Lock,
// increment a counter in Redis non-atomically (GET, then SET) under the
// lock; no update is lost. Without the lock (the broken variant) the same
// loop loses updates, so the check can fail.
func TestMutualExclusionCounter(t *testing.T) {
	workers, rounds := 120, 10
	if testing.Short() {
		workers, rounds = 40, 5
	}
	for _, tc := range []struct {
		name    string
		locked  bool
		wantAll bool
	}{
		{"locked", true, true},
		{"broken/unlocked", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			start := make(chan struct{})
			for w := 0; w < workers; w++ {
				c := s.Client()
				l := mustNew(t, c, "counter", redislock.WithExpire(10*time.Second))
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := 0; i < rounds; i++ {
						if tc.locked {
							if err := l.Acquire(ctx); err != nil {
								errs <- err
								return
							}
						}
						n, err := c.Get(ctx, "count").Int()
						if err != nil && !errors.Is(err, redis.Nil) {
							errs <- err
							return
						}
						if err := c.Set(ctx, "count", n+1, 0).Err(); err != nil {
							errs <- err
							return
						}
						if tc.locked {
							if err := l.Release(ctx); err != nil {
								errs <- err
								return
							}
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			got, _ := s.Client().Get(ctx, "count").Int()
			want := workers * rounds
			t.Logf("counter = %d, want %d", got, want)
			if (got == want) != tc.wantAll {
				t.Fatalf("counter = %d of %d increments; want no lost update = %v", got, want, tc.wantAll)
			}
		})
	}
}

// Redis ends a BLPOP that times out on its own clock tick, up to 1/hz
// late (100 ms by default), and the try pipelined behind it runs then: a
// hold won that way with a short expire must not be born lost, its local
// deadline counted from a try sent long before the key was set. Here the
// holder's key expires by itself (no signal), so the waiter's BLPOP times
// out; its hold must last about its 60 ms expire.
func TestHoldAfterTimedOutWaitIsNotBornLost(t *testing.T) {
	b := realBackend(t)
	ctx := ctxT(t)
	admin := b.client()
	for i := range 5 {
		if err := admin.Set(ctx, "lock:job", "a-dead-holder", 50*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		l := mustNew(t, b.client(), "job", redislock.WithExpire(60*time.Millisecond), redislock.WithTracking(false))
		mustAcquire(t, ctx, l)
		acquired := time.Now()
		select {
		case <-l.Done():
			t.Fatalf("round %d: the hold ended %v after its Acquire returned (%v), want about its 60 ms expire", i, time.Since(acquired), l.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("round %d: Release() = %v", i, err)
		}
	}
}

// A waiter with WithReplicaAck takes the lock with its script and a WAIT
// after it, woken or not: with no replica to acknowledge it, the take is
// released and Acquire returns ErrNotReplicated, never a lock a failover
// could lose.
func TestWokenWaiterWithReplicaAckIsAcknowledged(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	holder := mustNew(t, s.Client(), "job", redislock.WithExpire(30*time.Second))
	mustAcquire(t, ctx, holder)
	waiter := mustNew(t, s.Client(), "job", redislock.WithExpire(30*time.Second), redislock.WithReplicaAck(1, 100*time.Millisecond))
	done := acquireAsync(ctx, waiter)
	waitBlocked(t, s.Client(), 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := receive(t, done)
	if !errors.Is(r.err, redislock.ErrNotReplicated) {
		t.Fatalf("woken waiter's Acquire() with no replica = %v, want ErrNotReplicated", r.err)
	}
	if n := s.Client().Exists(ctx, "lock:job").Val(); n != 0 {
		t.Fatalf("the unacknowledged take is still in Redis (EXISTS lock:job = %d)", n)
	}
}

// heldSoonAfter receives a waiter's Acquire from ch and fails t unless it
// holds the lock within a second of since (a release, a reset): woken at
// once, not at the end of a slice or an expire. what names the waiter.
func heldSoonAfter(t *testing.T, ch <-chan acquired, since time.Time, what string) {
	t.Helper()
	if r := receive(t, ch); r.err != nil || r.at.Sub(since) > time.Second {
		t.Fatalf("%s: Acquire() = %v after %v; want the lock within 1s", what, r.err, r.at.Sub(since))
	}
}
