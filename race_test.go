package redislock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// holdReply is a hook that, for the first command that match picks, lets
// Redis run it and then holds its reply until release is closed; ran is
// closed once Redis has answered it. Cache the scripts first, or what Redis
// answered may be a NOSCRIPT, which go-redis follows with an EVAL.
func holdReply(match func(redis.Cmder) bool) (hook commandHook, ran, release chan struct{}) {
	ran, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook = func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		first := false
		if match(cmd) {
			once.Do(func() { first = true })
		}
		err := next(ctx, cmd)
		if first {
			close(ran)
			<-release
		}
		return err
	}
	return hook, ran, release
}

// A Release on an idle Lock keeps a concurrent Acquire on the same Lock
// out until its reply is in: otherwise the release, run by Redis after the
// acquire, deletes the new hold (the same id). The release here is held
// back by a hook before it is sent, as a descheduled goroutine would be.
func TestIdleReleaseKeepsOutConcurrentAcquire(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		entered, proceed := make(chan struct{}), make(chan struct{})
		var once sync.Once
		c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if scriptOf(cmd) == "release" { // the release: two keys
				once.Do(func() { close(entered); <-proceed })
			}
			return next(ctx, cmd)
		}))
		l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
		released := make(chan error, 1)
		go func() { released <- l.Release(ctx) }()
		<-entered
		err := l.TryAcquire(ctx)
		close(proceed)
		rerr := <-released
		if err == nil {
			owner := b.client().Get(ctx, l.Key()).Val()
			t.Fatalf("TryAcquire() during an idle Release = nil (then Release = %v, key %q, id %q); want ErrLocked",
				rerr, owner, l.ID())
		}
		if !errors.Is(err, redislock.ErrLocked) || !errors.Is(rerr, redislock.ErrNotAcquired) {
			t.Fatalf("TryAcquire() = %v, Release() = %v; want ErrLocked and ErrNotAcquired", err, rerr)
		}
		mustAcquire(t, ctx, l) // and the Lock is usable after
	})
}

// The reply of an Extend moves the deadline of the hold it was sent for,
// never of a later hold: here it arrives after Release and a new Acquire,
// and the new hold still ends at its own 1 s expire, not 10 s later.
func TestExtendReplyMovesOnlyItsHold(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		l := mustNew(t, c, "job", redislock.WithExpire(time.Second))
		mustAcquire(t, ctx, l)
		if err := l.Extend(ctx, 0); err != nil { // caches the script
			t.Fatal(err)
		}
		hook, ran, release := holdReply(func(cmd redis.Cmder) bool { return scriptOf(cmd) == "extend" })
		c.AddHook(hook)
		extended := make(chan error, 1)
		go func() { extended <- l.Extend(ctx, 10*time.Second) }()
		<-ran
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		mustAcquire(t, ctx, l)
		acquired := time.Now()
		close(release)
		if err := <-extended; err != nil {
			t.Fatalf("Extend() = %v", err)
		}
		// Sent after start and before acquired: the deadline is 1 s after.
		if d, _ := redislock.LocalDeadline(l); d.After(acquired.Add(time.Second)) {
			t.Fatalf("the new hold's local deadline is %v after its 1 s acquire: the old hold's Extend moved it", d.Sub(start))
		}
		select {
		case <-l.Done():
		case <-time.After(4*time.Second - time.Since(start)): // 1 s, and slack for a loaded machine; the bug is 10 s
			admin := b.client()
			d, ended := redislock.LocalDeadline(l)
			t.Fatalf("the new hold's Done still open %v after its 1 s acquire: the old hold's Extend moved its deadline (key %q, PTTL %v, id %q, Err %v, local deadline %v after the acquire, ended %v)",
				time.Since(start), admin.Get(ctx, l.Key()).Val(), admin.PTTL(ctx, l.Key()).Val(), l.ID(), l.Err(), d.Sub(start), ended)
		}
	})
}

// Two Extends of one hold: the reply of the first, which Redis ran first,
// arrives after the second's. The local deadline must follow the second
// (which set the key's expire last), or it would outlive the key: the
// hold's Done must have closed by the time the key is gone.
func TestConcurrentExtendsKeepTheDeadlineWithinTheKey(t *testing.T) {
	quick(t)
	b := realBackend(t)
	ctx := ctxT(t)
	admin := b.client()
	c := b.client()
	// Without tracking: this is about the local deadline, which tracking
	// would cover up by noticing the key's expiry.
	l := mustNew(t, c, "job", redislock.WithExpire(time.Minute), redislock.WithTracking(false))
	mustAcquire(t, ctx, l)
	if err := l.Extend(ctx, 0); err != nil { // caches the script
		t.Fatal(err)
	}
	hook, ran, release := holdReply(func(cmd redis.Cmder) bool { return scriptOf(cmd) == "extend" })
	c.AddHook(hook)
	first := make(chan error, 1)
	go func() { first <- l.Extend(ctx, 3*time.Second) }()
	<-ran
	second := make(chan error, 1)
	// 1 s: above the hold's safety margin (602 ms for a one-minute expire),
	// so the second Extend is sent, and its result is checked below.
	go func() { second <- l.Extend(ctx, time.Second) }()
	var secondErr error
	secondDone := false
	select { // without ordering it returns at once; with it, it waits
	case secondErr = <-second:
		secondDone = true
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !secondDone {
		secondErr = <-second
	}
	if secondErr != nil {
		t.Fatalf("second Extend() = %v", secondErr)
	}
	for deadline := time.Now().Add(3 * time.Second); admin.Exists(ctx, l.Key()).Val() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("key still there 3 s on (PTTL %v)", admin.PTTL(ctx, l.Key()).Val())
		}
	}
	select {
	case <-l.Done():
	case <-time.After(500 * time.Millisecond): // timer slack on a loaded machine; the bug is 3 s
		t.Fatal("the key is gone, and the hold's Done is still open: its deadline outlived the key")
	}
}
