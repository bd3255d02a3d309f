package redislock_test

import (
	"context"
	"errors"
	"fmt"
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

	lock, err := redislock.New(client, "nightly-report", redislock.WithExpire(30*time.Second))
	if err != nil {
		panic(err) // only bad arguments fail here; nothing was sent
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := lock.Acquire(ctx); err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	fmt.Println("running the report")
	if err := lock.Release(ctx); err != nil {
		fmt.Println("lock was lost before release:", err)
	}
	// Output: running the report
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
	}
	stuck, _ := redislock.New(client, "a")
	fmt.Println(stuck.Reset(ctx))

	n, err := redislock.ResetAll(ctx, client)
	fmt.Println(n, err)
	// Output:
	// <nil>
	// 2 <nil>
}
