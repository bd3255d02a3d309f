package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// newExampleClient returns a client of an in-process Redis, so that the
// examples run anywhere; in production it is your redis.NewClient.
func newExampleClient() (*redis.Client, func()) {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	return c, func() { c.Close(); m.Close() }
}

// Blocking use: wait for the lock, do the job, release.
func Example() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	lock, err := redislock.New(client, "nightly-report") // 30 s expire, renewed while held
	if err != nil {
		panic(err) // only bad arguments fail here; nothing was sent
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := lock.Acquire(ctx); err != nil {
		fmt.Println("not acquired:", err) // errors.Is(err, redislock.ErrLocked) on timeout
		return
	}
	defer lock.Release(ctx)
	fmt.Println("running the report")
	// Output: running the report
}

// New checks its arguments and sends nothing: a bad option is an error
// here, never later.
func ExampleNew() {
	client, closeAll := newExampleClient()
	defer closeAll()

	_, err := redislock.New(client, "reports", redislock.WithExpire(-time.Second))
	fmt.Println(errors.Is(err, redislock.ErrInvalidArgument))
	fmt.Println(err)
	lock, err := redislock.New(client, "reports", redislock.WithExpire(30*time.Second), redislock.WithAutoRenewal())
	fmt.Println(lock.Key(), err)
	// Output:
	// true
	// lock "reports": redislock: invalid argument: expire -1s: want 0 (never) or at least 1ms
	// lock:reports <nil>
}

// WithFencing gives every grant a token larger than all before it, to send
// with each write to the protected resource.
func ExampleWithFencing() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	var last int64
	for i := 0; i < 3; i++ {
		lock, _ := redislock.New(client, "invoice:42", redislock.WithExpire(time.Minute), redislock.WithFencing())
		_ = lock.Acquire(ctx)
		fmt.Println("token grows:", lock.Token() > last)
		last = lock.Token()
		_ = lock.Release(ctx)
	}
	// Output:
	// token grows: true
	// token grows: true
	// token grows: true
}

// Non-blocking use, as a cron job that skips its run when another host is
// already running it.
func ExampleLock_TryAcquire() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	first, _ := redislock.New(client, "expire-checkouts", redislock.WithExpire(time.Minute))
	second, _ := redislock.New(client, "expire-checkouts", redislock.WithExpire(time.Minute))

	fmt.Println("first:", first.TryAcquire(ctx))
	if err := second.TryAcquire(ctx); errors.Is(err, redislock.ErrLocked) {
		fmt.Println("second: busy, skipping this run")
	}
	// Output:
	// first: <nil>
	// second: busy, skipping this run
}

// Waiting with a deadline: the error is both ErrLocked and the context's.
func ExampleLock_Acquire_deadline() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	holder, _ := redislock.New(client, "ocr:doc-17")
	_ = holder.Acquire(ctx)
	defer holder.Release(context.Background())

	waiter, _ := redislock.New(client, "ocr:doc-17")
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := waiter.Acquire(ctx)
	fmt.Println(errors.Is(err, redislock.ErrLocked), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

// An owner id of your own makes the holder visible to operators, and lets
// another Lock value with the same id extend or release it.
func ExampleLock_OwnerID() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	lock, _ := redislock.New(client, "reindex", redislock.WithID("worker-3"), redislock.WithExpire(time.Minute))
	_ = lock.Acquire(ctx)

	observer, _ := redislock.New(client, "reindex")
	owner, _ := observer.OwnerID(ctx)
	locked, _ := observer.Locked(ctx)
	fmt.Println(owner, locked)

	sameOwner, _ := redislock.New(client, "reindex", redislock.WithID("worker-3"))
	fmt.Println(sameOwner.Release(ctx))
	// Output:
	// worker-3 true
	// <nil>
}

// Reset frees a lock whoever holds it, for recovery by an operator;
// ResetAll frees every lock under the prefix.
func ExampleResetAll() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	for _, name := range []string{"a", "b", "c"} {
		l, _ := redislock.New(client, name)
		_ = l.Acquire(ctx)
		defer l.Release(ctx) // reports the reset below, and ends the hold
	}
	stuck, _ := redislock.New(client, "a")
	fmt.Println(stuck.Reset(ctx))

	n, err := redislock.ResetAll(ctx, client)
	fmt.Println(n, err)
	// Output:
	// 1 <nil>
	// 2 <nil>
}

// Do runs a job under the lock and releases it afterwards; the job's
// context is cancelled, with a cause matching ErrLost, when the renewal
// finds the lock gone.
func ExampleLock_Do() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	lock, _ := redislock.New(client, "ocr:doc-17",
		redislock.WithExpire(600*time.Millisecond), redislock.WithAutoRenewal())
	err := lock.Do(ctx, func(ctx context.Context) error {
		fmt.Println("working under the lock")
		return nil
	})
	fmt.Println("done:", err)

	err = lock.Do(ctx, func(ctx context.Context) error {
		admin, _ := redislock.New(client, "ocr:doc-17")
		_, _ = admin.Reset(ctx) // an operator frees the lock under us
		<-ctx.Done()            // noticed at the next renewal (400 ms)
		fmt.Println("stopped:", errors.Is(context.Cause(ctx), redislock.ErrLost))
		return context.Cause(ctx)
	})
	fmt.Println("lost:", errors.Is(err, redislock.ErrLost), errors.Is(err, redislock.ErrExpired))
	// Output:
	// working under the lock
	// done: <nil>
	// stopped: true
	// lost: true true
}

// Locker adapts a Lock to sync.Locker, for code written against
// sync.Mutex.
func ExampleLock_Locker() {
	client, closeAll := newExampleClient()
	defer closeAll()

	lock, _ := redislock.New(client, "counter", redislock.WithExpire(10*time.Second))
	var mu sync.Locker = lock.Locker()
	mu.Lock()
	fmt.Println("held:", lock.Err() == nil)
	mu.Unlock()
	fmt.Println("released:", errors.Is(lock.Err(), redislock.ErrReleased))
	// Output:
	// held: true
	// released: true
}

// WithAutoRenewal keeps the lock for as long as it is held; Done closes
// and Err says why when it is lost.
func ExampleWithAutoRenewal() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	lock, _ := redislock.New(client, "expire-checkouts",
		redislock.WithExpire(600*time.Millisecond), redislock.WithAutoRenewal())
	if err := lock.Acquire(ctx); err != nil {
		panic(err)
	}
	// Another owner takes the key over (in real life: after this process
	// was paused past the expire).
	client.Set(ctx, lock.Key(), "someone-else", time.Minute)
	<-lock.Done() // closed by the next renewal
	fmt.Println(errors.Is(lock.Err(), redislock.ErrLost), errors.Is(lock.Err(), redislock.ErrTakenOver))
	// Output: true true
}

// WithFencing gives every grant a growing token; Guard writes to the same
// Redis only while the key still holds our id.
func ExampleLock_Guard() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	first, _ := redislock.New(client, "invoice:42", redislock.WithExpire(time.Minute), redislock.WithFencing())
	_ = first.Acquire(ctx)
	t1 := first.Token()
	_ = first.Release(ctx)

	second, _ := redislock.New(client, "invoice:42", redislock.WithExpire(time.Minute), redislock.WithFencing())
	_ = second.Acquire(ctx)
	fmt.Println("tokens grow:", second.Token() > t1)

	err := second.Guard(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, "invoice:42:total", "99.50", 0)
		return nil
	})
	fmt.Println("guarded write:", err)
	err = first.Guard(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, "invoice:42:total", "0", 0)
		return nil
	})
	fmt.Println("late holder refused:", errors.Is(err, redislock.ErrNotAcquired))
	// Output:
	// tokens grow: true
	// guarded write: <nil>
	// late holder refused: true
}

// List shows every held lock, with its owner and remaining time.
func ExampleList() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	for _, name := range []string{"report:daily", "report:weekly", "reindex"} {
		l, _ := redislock.New(client, name, redislock.WithID("worker-1"))
		_ = l.Acquire(ctx)
		defer l.Release(ctx)
	}
	infos, _ := redislock.List(ctx, client, "report:*")
	for _, info := range infos {
		fmt.Println(info.Name, info.Owner)
	}
	// Output:
	// report:daily worker-1
	// report:weekly worker-1
}

// Check reports what makes locks unsafe on a deployment, problems first.
func ExampleCheck() {
	client, closeAll := newExampleClient()
	defer closeAll()

	report, err := redislock.Check(context.Background(), client)
	if err != nil {
		panic(err) // unreachable
	}
	for _, f := range report {
		if f.Severity == redislock.SeverityProblem {
			fmt.Println(f)
		}
	}
	fmt.Println("safe for locks:", report.OK())
	// Output: safe for locks: true
}

// Logging a lock's events through log/slog, with python-redis-lock's
// logger names in the attribute "logger". (The time is left out here so
// that the output is the same on every run.)
func ExampleWithLogger() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "wait" {
				return slog.Attr{}
			}
			return a
		},
	}))
	// WithTracking(false): the example's in-process server refuses the key
	// watch, which would log a warning at a moment of its own.
	lock, err := redislock.New(client, "nightly-report", redislock.WithID("worker-1"), redislock.WithLogger(logger), redislock.WithTracking(false))
	if err != nil {
		panic(err)
	}
	if err := lock.Acquire(ctx); err != nil {
		panic(err)
	}
	lock.Release(ctx)
	// Output:
	// level=INFO msg="acquired lock" logger=redis_lock.acquire lock=nightly-report key=lock:nightly-report owner=worker-1 token=0
}

// At most two workers call the API at once: eight goroutines share one
// Semaphore of two permits (as other processes would, through Redis).
func ExampleSemaphore() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	sem, err := redislock.NewSemaphore(client, "payment-api", 2)
	if err != nil {
		panic(err)
	}
	var (
		mu           sync.Mutex
		inside, most int
		wg           sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := sem.Do(ctx, func(ctx context.Context) error {
				mu.Lock()
				inside++
				most = max(most, inside)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // the call
				mu.Lock()
				inside--
				mu.Unlock()
				return nil
			})
			if err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	fmt.Println("at most", most, "inside at once")
	// Output: at most 2 inside at once
}

// A full semaphore: TryAcquire says so at once; Status lists who holds.
func ExampleSemaphore_TryAcquire() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	exports, _ := redislock.NewSemaphore(client, "exports", 1)
	p, err := exports.TryAcquire(ctx)
	if err != nil {
		panic(err)
	}
	defer p.Release(ctx)
	_, err = exports.TryAcquire(ctx)
	fmt.Println("busy:", errors.Is(err, redislock.ErrLocked))
	st, _ := exports.Status(ctx)
	fmt.Println("size", st.Holders[0].Size, "held by the permit:", st.Holders[0].Owner == p.ID())
	// Output:
	// busy: true
	// size 1 held by the permit: true
}

// Many readers of a config at once, one writer migrating it: one RWMutex
// per process, shared by its goroutines as a sync.RWMutex.
func ExampleRWMutex() {
	client, closeAll := newExampleClient()
	defer closeAll()
	ctx := context.Background()

	config, err := redislock.NewRWMutex(client, "config")
	if err != nil {
		panic(err)
	}
	r1, err := config.RLock(ctx) // a read permit each
	if err != nil {
		panic(err)
	}
	r2, err := config.RLock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("writer while two read:", config.TryLock(ctx) != nil)
	r1.Release(ctx)
	r2.Release(ctx)

	if err := config.Lock(ctx); err != nil {
		panic(err)
	}
	_, err = config.TryRLock(ctx)
	fmt.Println("reader while one writes:", err != nil)
	config.Unlock(ctx)
	// Output:
	// writer while two read: true
	// reader while one writes: true
}
