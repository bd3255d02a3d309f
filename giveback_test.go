package redislock_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// dropGiveback refuses to send the giveback script: the broken variant of
// the giveback tests.
var dropGiveback = commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	if scriptOf(cmd) == "giveback" {
		err := errors.New("giveback dropped by the test")
		cmd.SetErr(err)
		return err
	}
	return next(ctx, cmd)
})

// A waiter whose BLPOP pops the wake-up signal but whose try, pipelined
// behind it, gets an error reply (OOM under maxmemory + noeviction, the
// policy Check asks for) gives the signal back: a python-redis-lock waiter
// queued behind it (a raw BLPOP on the signal list) is woken. Without the
// giveback (the broken variant) it sleeps on.
func TestPoppedSignalIsGivenBackAfterErrorReply(t *testing.T) {
	t.Parallel()
	andBroken(t, "giveback", "no giveback", func(t *testing.T, broken bool) {
		s, ctx, admin := started(t)
		holder := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute))
		mustAcquire(t, ctx, holder)

		wc := s.Client()
		if broken {
			wc.AddHook(dropGiveback)
		}
		waiter := mustNew(t, wc, "job", redislock.WithExpire(time.Minute))
		waiterDone := acquireAsync(ctx, waiter)
		waitBlocked(t, admin, 1) // first in line: Redis serves BLPOP in FIFO order

		python := s.Client()
		popped := make(chan error, 1)
		go func() {
			// python-redis-lock's blocking acquire waits with BLPOP
			// signal <timeout>, in whole seconds; 2 s stands in for
			// its "0" (forever).
			_, err := python.BLPop(ctx, 2*time.Second, "lock-signal:job").Result()
			popped <- err
		}()
		waitBlocked(t, admin, 2)

		// Out of memory: SET (denyoom) is refused as a script's first
		// write, so the waiter's try fails; the release, whose first
		// write is a DEL, goes through.
		if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.ConfigSet(context.Background(), "maxmemory", "0") })
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("Release() under OOM = %v", err)
		}
		if r := receive(t, waiterDone); r.err == nil || !strings.Contains(r.err.Error(), "OOM") {
			t.Fatalf("waiter's Acquire() = %v, want the OOM reply", r.err)
		}
		start := time.Now()
		err := <-popped
		woken := err == nil
		if woken == broken {
			t.Fatalf("python waiter's BLPOP = %v after %v; want woken = %v", err, time.Since(start), !broken)
		}
		if woken && time.Since(start) > 2*time.Second {
			t.Fatalf("python waiter woken only after %v", time.Since(start))
		}
		t.Logf("python waiter's BLPOP returned %v, %v after the Go waiter's OOM", err, time.Since(start))
	})
}

// unsent fails, without sending them, the next acquire script and, while
// failGiveback is set, every giveback script, with an error that is not a
// Redis reply: as a connection that broke, so the caller cannot know
// whether they ran.
type unsent struct {
	failAcquire  atomic.Bool
	failGiveback atomic.Bool
	givebacks    atomic.Int32 // giveback scripts failed
}

var errUnsent = errors.New("injected: connection broke, outcome unknown")

func (h *unsent) hook(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	fail := scriptOf(cmd) == "acquire" && h.failAcquire.CompareAndSwap(true, false)
	if scriptOf(cmd) == "giveback" && h.failGiveback.Load() {
		fail = true
		h.givebacks.Add(1)
	}
	if fail {
		cmd.SetErr(errUnsent)
		return errUnsent
	}
	return next(ctx, cmd)
}

// awaitGiveback waits until a giveback has been failed by the hook.
func (h *unsent) awaitGiveback(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); h.givebacks.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no giveback was sent in 5 s")
		}
	}
}

// A giveback that got no reply may run much later (a request held by a
// partition runs when it heals). It must not delete a hold that the same
// Lock acquired since: the Lock takes a fresh id, so the late giveback, run
// here by hand with the old id, misses the new key. Without the fresh id
// (the mutation "giveback-unanswered-keeps-id") it deletes it.
func TestLateGivebackSparesTheNextHold(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		admin := b.client()
		c := b.client()
		hook := &unsent{}
		c.AddHook(commandHook(hook.hook))
		l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
		oldID := l.ID()
		hook.failAcquire.Store(true)
		hook.failGiveback.Store(true)
		if err := l.TryAcquire(ctx); !errors.Is(err, errUnsent) {
			t.Fatalf("TryAcquire() = %v, want the injected fault", err)
		}
		hook.awaitGiveback(t)
		hook.failGiveback.Store(false)
		mustAcquire(t, ctx, l) // waits for the failed giveback to end
		if l.ID() == oldID {
			t.Fatalf("ID() = %q after an unanswered giveback; want a fresh id", oldID)
		}

		// The late giveback of the old id arrives.
		src, err := os.ReadFile("internal/wire/lua/giveback.lua")
		if err != nil {
			t.Fatal(err)
		}
		if err := redis.NewScript(string(src)).Run(ctx, admin, []string{l.Key(), "lock-signal:job"}, oldID, "1000", "1").Err(); err != nil {
			t.Fatal(err)
		}
		if got := admin.Get(ctx, l.Key()).Val(); got != l.ID() {
			t.Fatalf("after the late giveback the key holds %q, want the new hold's %q", got, l.ID())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// A caller-given id never changes: other Locks share it.
		shared := mustNew(t, c, "job2", redislock.WithID("worker-7"), redislock.WithExpire(time.Minute))
		hook.givebacks.Store(0)
		hook.failAcquire.Store(true)
		hook.failGiveback.Store(true)
		if err := shared.TryAcquire(ctx); !errors.Is(err, errUnsent) {
			t.Fatalf("TryAcquire() = %v, want the injected fault", err)
		}
		hook.awaitGiveback(t)
		hook.failGiveback.Store(false)
		mustAcquire(t, ctx, shared)
		if shared.ID() != "worker-7" {
			t.Fatalf("ID() = %q after an unanswered giveback, want the caller's \"worker-7\"", shared.ID())
		}

		// A giveback that was answered keeps the id.
		id := l.ID()
		hook.failAcquire.Store(true)
		if err := l.TryAcquire(ctx); !errors.Is(err, errUnsent) {
			t.Fatalf("TryAcquire() = %v, want the injected fault", err)
		}
		mustAcquire(t, ctx, l)
		if l.ID() != id {
			t.Fatalf("ID() changed from %q to %q after an answered giveback", id, l.ID())
		}
	})
}

// A giveback whose first reply is lost and whose retry is answered also
// leaves an attempt that may run late: the Lock takes a fresh id.
func TestRetriedGivebackRenewsID(t *testing.T) {
	quick(t)
	s := redistest.Start(t)
	p := proxyTo(t, s)
	ctx := ctxT(t)
	c := clientVia(t, p)
	hook := &unsent{}
	var dropGivebackReply atomic.Bool
	c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if scriptOf(cmd) == "giveback" && dropGivebackReply.CompareAndSwap(true, false) {
			p.DropNextReply() // this giveback runs; its reply is lost; go-redis retries
		}
		return hook.hook(ctx, cmd, next)
	}))
	l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
	// Cache the giveback script (so the lost reply is of a giveback that
	// ran, not of a NOSCRIPT): one answered giveback, which keeps the id.
	oldID := l.ID()
	hook.failAcquire.Store(true)
	if err := l.TryAcquire(ctx); !errors.Is(err, errUnsent) {
		t.Fatalf("TryAcquire() = %v, want the injected fault", err)
	}
	mustAcquire(t, ctx, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l.ID() != oldID {
		t.Fatal("ID() changed after an answered giveback")
	}
	hook.failAcquire.Store(true)
	dropGivebackReply.Store(true)
	if err := l.TryAcquire(ctx); !errors.Is(err, errUnsent) {
		t.Fatalf("TryAcquire() = %v, want the injected fault", err)
	}
	mustAcquire(t, ctx, l) // waits for the giveback
	if dropGivebackReply.Load() {
		t.Fatal("no giveback was sent")
	}
	if l.ID() == oldID {
		t.Fatal("ID() unchanged after a giveback that go-redis retried; want a fresh id")
	}
}
