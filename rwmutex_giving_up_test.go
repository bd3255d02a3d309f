package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// RWMutex waiters that give up, lose a reply or share a client: what they
// leave in Redis for the next ones.

// behindWriter starts a server where W1 (on a client of its own) holds the
// RWMutex "cfg" for writing, and returns it with a client to that server
// through a proxy adding latency, for readers to share.
func behindWriter(t *testing.T, ctx context.Context, latency time.Duration) (*redistest.Server, *redis.Client, *rwParticipant) {
	t.Helper()
	s := redistest.Start(t)
	p := proxyTo(t, s)
	p.SetLatency(latency)
	shared := clientVia(t, p, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	w1 := mustRWMutex(t, s.Client(), "cfg")
	if err := w1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	return s, shared, w1
}

// waitInfo polls rw's Info until ok accepts it, failing t after 3 s.
func waitInfo(t *testing.T, ctx context.Context, rw *rwParticipant, what string, ok func(rwInfo) bool) {
	t.Helper()
	waitInfoWithin(t, ctx, rw, 3*time.Second, what, ok)
}

// waitInfoWithin is waitInfo failing after d.
func waitInfoWithin(t *testing.T, ctx context.Context, rw *rwParticipant, d time.Duration, what string, ok func(rwInfo) bool) {
	t.Helper()
	for deadline := time.Now().Add(d); ; {
		info, err := rw.Info(ctx)
		if err == nil && ok(info) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Info = %+v, %v", what, info, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A reader that gave up, alone in its client's queue, takes back its
// queue's registration late (25 ms latency); a reader that starts waiting
// on the same client meanwhile is in a new queue, whose registration the
// late take-back must not remove: it comes in before the next writer.
func TestRWMutexLateLeaveSparesANewQueue(t *testing.T) {
	quick(t)
	ctx := ctxT(t)
	s, shared, w1 := behindWriter(t, ctx, 25*time.Millisecond)
	a, b := mustRWMutex(t, shared, "cfg"), mustRWMutex(t, shared, "cfg")
	// Long enough for A's first try (a connection to dial, a script to
	// load, at 50 ms a round trip) to hear "held": ErrLocked says it did.
	actx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	if err := a.RLock(actx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("A's RLock = %v", err)
	}
	cancel()
	type in struct {
		who string
		at  time.Time
	}
	got := make(chan in, 2)
	go func() {
		if err := b.RLock(ctx); err != nil {
			t.Error(err)
		}
		got <- in{"B", time.Now()}
		time.Sleep(200 * time.Millisecond)
		b.RUnlock(ctx)
	}()
	a.Settle(ctx) // A's late take-back has run, after B's first try registered B
	// B stays registered. (Give a loaded machine time for B's first try,
	// but less than B's 2 s slice, after which its next try would
	// register it again and hide a registration taken back by mistake.)
	waitInfoWithin(t, ctx, w1, 1500*time.Millisecond, "after A's take-back, B still registered",
		func(i rwInfo) bool { return i.WaitingReaders == 1 })
	w2 := mustRWMutex(t, s.Client(), "cfg")
	go func() {
		if err := w2.Lock(ctx); err != nil {
			t.Error(err)
		}
		got <- in{"W2", time.Now()}
		w2.Unlock(ctx)
	}()
	waitInfo(t, ctx, w1, "W2 registered", func(i rwInfo) bool { return i.WaitingWriters == 1 })
	w1.Unlock(ctx)
	first, second := <-got, <-got
	t.Logf("after W1's Unlock: %s, then %s %v later", first.who, second.who, second.at.Sub(first.at))
	if first.who != "B" {
		t.Fatalf("%s came in first; want B, which waited before W1's release", first.who)
	}
}

// A head reader and a follower on one client both give up: no
// registration is left behind (the follower's take-back waits for the
// head's abandoned wait). Eight rounds, with and without latency.
func TestRWMutexReadersGivingUpLeaveNoGhost(t *testing.T) {
	t.Parallel()
	for _, side := range []struct {
		name    string
		n       int
		wait    func(rw *rwParticipant, ctx context.Context) error
		waiting func(rwInfo) int
	}{
		{"readers", 2, (*rwParticipant).RLock, func(i rwInfo) int { return i.WaitingReaders }},
		// Writers register each for itself. Ten on one client share its
		// eight wait lanes: a writer that gives up is then not alone in
		// its BLPOP, whose read is not cut, and the try behind it runs
		// and registers it again, unless its registration is taken back
		// after that try.
		{"writers", 10, (*rwParticipant).Lock, func(i rwInfo) int { return i.WaitingWriters }},
	} {
		for _, latency := range []time.Duration{0, 10 * time.Millisecond} {
			t.Run(fmt.Sprint(side.name, " latency ", latency), func(t *testing.T) {
				ctx := ctxT(t)
				_, shared, w1 := behindWriter(t, ctx, latency)
				for round := range 8 {
					var wg sync.WaitGroup
					var waiters []*rwParticipant
					for i := range side.n {
						r := mustRWMutex(t, shared, "cfg")
						waiters = append(waiters, r)
						wg.Add(1)
						go func() {
							defer wg.Done()
							rctx, cancel := context.WithTimeout(ctx, time.Duration(100+50*(i%2))*time.Millisecond)
							defer cancel()
							side.wait(r, rctx)
						}()
					}
					wg.Wait()
					for _, r := range waiters {
						r.Settle(ctx)
					}
					if info, _ := w1.Info(ctx); side.waiting(info) != 0 {
						t.Fatalf("round %d: %d waiting %s left after all %d gave up", round, side.waiting(info), side.name, side.n)
					}
				}
			})
		}
	}
}

// A blocking RLock or Lock whose first try lost its reply (no retry)
// takes back the registration the try may have made.
func TestRWMutexLostFirstReplyLeavesNoGhost(t *testing.T) {
	quick(t)
	for _, side := range []struct {
		name      string
		try, wait func(rw *rwParticipant, ctx context.Context) error
		waiting   func(rwInfo) int
	}{
		{"reader", (*rwParticipant).TryRLock, (*rwParticipant).RLock, func(i rwInfo) int { return i.WaitingReaders }},
		{"writer", (*rwParticipant).TryLock, (*rwParticipant).Lock, func(i rwInfo) int { return i.WaitingWriters }},
	} {
		t.Run(side.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			p := proxyTo(t, s)
			c := clientVia(t, p, func(o *redis.Options) { o.MaxRetries = -1; o.ContextTimeoutEnabled = true })
			w1 := mustRWMutex(t, s.Client(), "cfg")
			if err := w1.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			r := mustRWMutex(t, c, "cfg")
			// Load the script (a try that will not wait registers
			// nothing), so that the reply dropped next is that of a try
			// that ran and registered.
			if err := side.try(r, ctx); !errors.Is(err, redislock.ErrLocked) {
				t.Fatalf("a try under a writer = %v", err)
			}
			p.DropNextReply()
			if err := side.wait(r, ctx); err == nil {
				t.Fatal("a blocking acquire succeeded through a dropped reply")
			}
			r.Settle(ctx) // the take-back runs in the background; Settle waits for it
			if info, err := w1.Info(ctx); err != nil || side.waiting(info) != 0 {
				t.Fatalf("after the lost reply: Info = %+v, %v; want nobody waiting (not one that lapses seconds later)", info, err)
			}
		})
	}
}

// Thirty readers on one client behind a writer, with 25 ms of latency,
// and a second writer waiting: every reader comes in before the second
// writer (they come in one round trip apart; the admission lasts as long
// as a waiting registration).
func TestRWMutexManySharedReadersBeforeTheNextWriter(t *testing.T) {
	quick(t)
	ctx := ctxT(t)
	s, shared, w1 := behindWriter(t, ctx, 25*time.Millisecond)
	const n = 30
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	for i := range n {
		r := mustRWMutex(t, shared, "cfg")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.RLock(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, fmt.Sprint("R", i))
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			r.RUnlock(ctx)
		}()
	}
	w2 := mustRWMutex(t, s.Client(), "cfg")
	waitInfo(t, ctx, w1, "the readers registered", func(i rwInfo) bool { return i.WaitingReaders == 1 })
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w2.Lock(ctx); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		order = append(order, "W2")
		mu.Unlock()
		w2.Unlock(ctx)
	}()
	waitInfo(t, ctx, w1, "W2 registered", func(i rwInfo) bool { return i.WaitingWriters == 1 })
	start := time.Now()
	w1.Unlock(ctx)
	wg.Wait()
	t.Logf("all in %v after W1's Unlock; W2 came %d of %d", time.Since(start), len(order), n+1)
	if order[len(order)-1] != "W2" {
		t.Fatalf("W2 came in before some readers that waited: %v", order)
	}
}

// Many RWMutexes with distinct names, each taken and released once: the
// process keeps no local queue, nor anything else, per name.
func TestRWMutexKeepsNothingPerName(t *testing.T) {
	b := miniBackend(t)
	ctx := ctxT(t)
	c := b.client()
	w := mustRWMutex(t, c, "held")
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		rw := mustRWMutex(t, c, fmt.Sprint("doc-", i))
		if err := rw.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		rw.RUnlock(ctx)
	}
	r := mustRWMutex(t, c, "held")
	rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	r.RLock(rctx) // waits, then gives up
	cancel()
	r.Settle(ctx)
	if n := redislock.WaitQueues(); n != 0 {
		t.Fatalf("%d local wait queues left", n)
	}
}
