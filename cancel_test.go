package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// A waiter whose context is cancelled (no deadline) in the middle of a
// BLPOP slice returns at once, with or without ContextTimeoutEnabled,
// although go-redis cannot interrupt the read: the wait is finished in the
// background. Fifty tries on one Lock (each joins the one before), then:
// the holder still holds, no wake key is left, the next release wakes a
// waiter (no signal was lost), and no goroutine is left over. Before the
// fix each try returned at the end of its 2 s slice.
func TestCancelledWaitReturnsAtOnce(t *testing.T) {
	for _, timeouts := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", timeouts), func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			t.Cleanup(func() { verifyNoLeaks(t, before) }) // runs last, after the server stops
			s, ctx, admin := started(t)
			opt := func(o *redis.Options) { o.ContextTimeoutEnabled = timeouts }
			holder := mustNew(t, s.Client(), "job") // no expire: 2 s slices
			mustAcquire(t, ctx, holder)
			waiter := mustNew(t, s.Client(opt), "job")

			tries := 50
			if testing.Short() {
				tries = 20 // each try waits up to 90 ms into the slice
			}
			var took []time.Duration
			dialled := func() int64 {
				n, _ := strconv.ParseInt(infoField(t, admin, "stats", "total_connections_received"), 10, 64)
				return n
			}
			dialledBefore := dialled()
			for i := range tries {
				if err := waiter.Settle(ctx); err != nil {
					t.Fatal(err)
				}
				waitBlocked(t, admin, 0)
				wctx, cancel := context.WithCancel(ctx)
				ch := acquireAsync(wctx, waiter)
				waitBlocked(t, admin, 1)
				time.Sleep(time.Duration(i%10) * 10 * time.Millisecond) // somewhere in the slice
				start := time.Now()
				cancel()
				r := receive(t, ch)
				if !errors.Is(r.err, redislock.ErrLocked) || !errors.Is(r.err, context.Canceled) {
					t.Fatalf("try %d: Acquire() = %v, want ErrLocked and context.Canceled", i, r.err)
				}
				took = append(took, r.at.Sub(start))
			}
			// A cancel wakes its BLPOP through the wake key: its lane keeps
			// its connection. Cutting the read instead (see
			// TestCancelledWaitIsCutWhenItsWakeUpIsStuck) drops it, and the
			// next wait dials again; a wake-up slower than the cut's 50 ms
			// may under load, not most.
			if n := dialled() - dialledBefore; n > int64(tries/2) {
				t.Fatalf("%d connections dialled over %d cancelled waits; want the wake-ups to keep them", n, tries)
			}
			slices.Sort(took)
			t.Logf("cancel -> Acquire returned, %d tries: p50 %v, p99 (nearest rank: the slowest) %v", tries, took[tries/2-1], took[tries-1])
			// The slice is 2 s: a return that waited for the BLPOP would
			// take hundreds of milliseconds in most tries.
			if took[tries-1] > 250*time.Millisecond {
				t.Fatalf("slowest return after cancel: %v; want far less than the 2 s slice", took[tries-1])
			}

			if err := waiter.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			if owner, err := holder.OwnerID(ctx); err != nil || owner != holder.ID() {
				t.Fatalf("owner after the cancelled waits = %q, %v; want the holder's %q", owner, err, holder.ID())
			}
			if keys := admin.Keys(ctx, "*:wake:*").Val(); len(keys) != 0 {
				t.Fatalf("wake keys left behind: %q", keys)
			}
			next := mustNew(t, s.Client(), "job")
			ch := acquireAsync(ctx, next)
			waitBlocked(t, admin, 1)
			released := time.Now()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			heldSoonAfter(t, ch, released, "the next waiter, after the release")
			if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A waiter cancelled at the very moment the holder releases may have its
// BLPOP take the signal, or its try take the lock, after it has returned.
// Either way the background finish hands the lock on: a second waiter,
// blocked behind it in Redis, gets it within a second every time, and the
// lock never stays with the waiter that gave up.
func TestCancelRacingReleaseLosesNoWakeUp(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	holder := mustNew(t, s.Client(), "job")
	quitter := mustNew(t, s.Client(), "job")
	second := mustNew(t, s.Client(), "job")
	for round := range 30 {
		mustAcquire(t, ctx, holder)
		qctx, cancel := context.WithCancel(ctx)
		q := acquireAsync(qctx, quitter)
		waitBlocked(t, admin, 1) // the quitter is first in line
		w := acquireAsync(ctx, second)
		waitBlocked(t, admin, 2)
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		released := time.Now()
		go cancel()
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		qr := receive(t, q)
		if qr.err == nil {
			// It won before it saw the cancel: a plain hand-off.
			if err := quitter.Release(ctx); err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(qr.err, context.Canceled) {
			t.Fatalf("round %d: quitter's Acquire() = %v", round, qr.err)
		}
		heldSoonAfter(t, w, released, fmt.Sprintf("round %d: the second waiter", round))
		if err := quitter.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		if owner, _ := second.OwnerID(ctx); owner != second.ID() {
			t.Fatalf("round %d: owner %q, want the second waiter", round, owner)
		}
		if err := second.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// pipelineHook is a redis.Hook made of one function, called for every
// pipeline (and MULTI/EXEC transaction) sent; commands sent on their own
// pass through untouched.
type pipelineHook func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error

func (h pipelineHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h pipelineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h pipelineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { return h(ctx, cmds, next) }
}

// gateWake returns a client of s whose wake pushes (the LPUSH with which
// an Acquire that gave up interrupts its own BLPOP) wait until the
// returned func is called: the test decides what the BLPOP gets first.
func gateWake(t *testing.T, s *redistest.Server) (*redis.Client, func()) {
	gate := make(chan struct{})
	c := s.Client()
	// Waits run in lane goroutines, as on a cluster (a lane run by its
	// caller returns only once its BLPOP does: see
	// TestCancelledWaitIsCutWhenItsWakeUpIsStuck): the caller leaves at
	// once, and the BLPOP outlives it until the push lands.
	redislock.SetWaitCut(t, c, -1)
	redislock.AddWaitHook(c, pipelineHook(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, cmd := range cmds {
			if cmd.Name() == "lpush" {
				<-gate
			}
		}
		return next(ctx, cmds)
	}))
	var once bool
	return c, func() {
		if !once {
			once = true
			close(gate)
		}
	}
}

// A waiter whose wake-up push does not land (Redis does not answer it)
// still returns soon after its context ends: its BLPOP's read is cut
// short, well within its 2 s slice, and Redis drops the BLPOP with the
// connection. The next release then wakes the next waiter at once: no
// signal is lost, and nothing is left taken for the waiter that gave up.
func TestCancelledWaitIsCutWhenItsWakeUpIsStuck(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	holder := mustNew(t, s.Client(), "job") // no expire: 2 s slices
	mustAcquire(t, ctx, holder)
	c := s.Client()
	gate := make(chan struct{})
	defer close(gate)
	redislock.AddWaitHook(c, pipelineHook(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, cmd := range cmds {
			if cmd.Name() == "lpush" {
				<-gate // the wake push hangs until the test ends
			}
		}
		return next(ctx, cmds)
	}))
	quitter := mustNew(t, c, "job")
	qctx, cancel := context.WithCancel(ctx)
	q := acquireAsync(qctx, quitter)
	waitBlocked(t, admin, 1)
	cancelled := time.Now()
	cancel()
	r := receive(t, q)
	if !errors.Is(r.err, context.Canceled) || r.at.Sub(cancelled) > time.Second {
		t.Fatalf("quitter's Acquire() = %v after %v; want Canceled well within the 2 s slice", r.err, r.at.Sub(cancelled))
	}
	// The cut connection took its BLPOP with it (waitBlocked only waits
	// for at least n blocked clients).
	for deadline := time.Now().Add(10 * time.Second); blockedClients(t, admin) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients still blocked 10s after the cut; want the quitter's BLPOP gone", blockedClients(t, admin))
		}
	}
	if err := quitter.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	next := mustNew(t, s.Client(), "job")
	w := acquireAsync(ctx, next)
	waitBlocked(t, admin, 1)
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	heldSoonAfter(t, w, released, "the next waiter")
	if owner, _ := next.OwnerID(ctx); owner != next.ID() {
		t.Fatalf("owner %q, want the next waiter", owner)
	}
}

// What an Acquire's BLPOP and try do after the caller gave up is undone in
// the background, deterministically: the wake push is held back until the
// release (or a stray signal) has reached the abandoned BLPOP.
func TestAbandonedWaitHandsOnWhatItTook(t *testing.T) {
	quick(t)
	t.Run("its try took the lock", func(t *testing.T) {
		s, ctx, admin := started(t)
		holder := mustNew(t, s.Client(), "job") // no expire: a lock left taken stays so
		mustAcquire(t, ctx, holder)
		c, open := gateWake(t, s)
		defer open()
		quitter := mustNew(t, c, "job")
		qctx, cancel := context.WithCancel(ctx)
		q := acquireAsync(qctx, quitter)
		waitBlocked(t, admin, 1)
		cancel()
		if r := receive(t, q); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("quitter's Acquire() = %v, want Canceled", r.err)
		}
		if err := holder.Release(ctx); err != nil { // wakes the abandoned BLPOP, whose try wins
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for owner, _ := holder.OwnerID(ctx); owner != quitter.ID(); owner, _ = holder.OwnerID(ctx) {
			if time.Now().After(deadline) {
				t.Fatalf("owner %q 10s after the release; want the abandoned try's (%q)", owner, quitter.ID())
			}
			time.Sleep(time.Millisecond)
		}
		next := mustNew(t, s.Client(), "job")
		w := acquireAsync(ctx, next)
		waitBlocked(t, admin, 1)
		opened := time.Now()
		open()
		heldSoonAfter(t, w, opened, "the next waiter")
		if err := quitter.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		if keys := admin.Keys(ctx, "*:wake:*").Val(); len(keys) != 0 {
			t.Fatalf("wake keys left behind: %q", keys)
		}
	})
	// And when the caller closes its client as well (found by review: 53
	// of 200 plain Locks stayed taken, without expire, by a caller told
	// it had not acquired; RWMutex readers and writers alike), the lock is
	// released on the runtime's connections, which outlive the client.
	for _, kind := range []string{"lock", "reader", "writer"} {
		t.Run("its try took the "+kind+", then its client was closed", func(t *testing.T) {
			s, ctx, admin := started(t)
			c, open := gateWake(t, s)
			defer open()
			qctx, cancel := context.WithCancel(ctx)
			var (
				release func() error
				held    func() bool
				settle  func() error
				q       = make(chan error, 1)
			)
			if kind == "lock" {
				holder := mustNew(t, admin, "job") // no expire: a lock left taken stays so
				mustAcquire(t, ctx, holder)
				quitter := mustNew(t, c, "job")
				go func() { q <- quitter.Acquire(qctx) }()
				release = func() error { return holder.Release(ctx) }
				held = func() bool { return admin.Get(ctx, "lock:job").Val() == quitter.ID() }
				settle = func() error { return quitter.Settle(ctx) }
			} else {
				holder := mustRWMutex(t, admin, "cfg")
				if err := holder.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				quitter := mustRWMutex(t, c, "cfg", redislock.WithID("quitter")) // the id of its abandoned read permit too
				go func() {
					if kind == "reader" {
						q <- quitter.RLock(qctx)
					} else {
						q <- quitter.Lock(qctx)
					}
				}()
				release = func() error { return holder.Unlock(ctx) }
				held = func() bool {
					i, err := holder.Info(ctx)
					return err == nil && (i.Writer == quitter.ID() || len(i.Readers) == 1 && i.Readers[0].ID == quitter.ID())
				}
				settle = func() error { return quitter.Settle(ctx) }
			}
			waitBlocked(t, admin, 1)
			cancel()
			if err := <-q; !errors.Is(err, context.Canceled) {
				t.Fatalf("the quitter's acquire = %v, want Canceled", err)
			}
			if err := release(); err != nil { // wakes the abandoned BLPOP, whose try wins
				t.Fatal(err)
			}
			within(t, 10*time.Second, "the abandoned try takes the "+kind, held)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			open() // the abandoned wait ends: what it took is released
			if err := settle(); err != nil {
				t.Fatal(err)
			}
			keys := slices.DeleteFunc(admin.Keys(ctx, "lock*").Val(), func(k string) bool { return strings.Contains(k, "signal") })
			if len(keys) != 0 {
				t.Fatalf("after the abandoned wait settled: %q; want nothing taken, nothing registered (signals aside)", keys)
			}
		})
	}
	t.Run("its BLPOP took the signal, its try failed", func(t *testing.T) {
		s, ctx, admin := started(t)
		holder := mustNew(t, s.Client(), "job")
		mustAcquire(t, ctx, holder)
		c, open := gateWake(t, s)
		defer open()
		quitter := mustNew(t, c, "job")
		qctx, cancel := context.WithCancel(ctx)
		q := acquireAsync(qctx, quitter)
		waitBlocked(t, admin, 1) // first in line
		// Another process's waiter, python-redis-lock style, behind it.
		got := make(chan error, 1)
		go func() { got <- s.Client().BLPop(ctx, 5*time.Second, "lock-signal:job").Err() }()
		waitBlocked(t, admin, 2)
		cancel()
		if r := receive(t, q); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("quitter's Acquire() = %v, want Canceled", r.err)
		}
		// Out of memory: the abandoned BLPOP takes the release's signal
		// and its try's SET is refused (see
		// TestPoppedSignalIsGivenBackAfterErrorReply).
		if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.ConfigSet(context.Background(), "maxmemory", "0") })
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		waitBlocked(t, admin, 1) // the abandoned BLPOP has returned
		givenBackAtOnce(t, ctx, open, got, quitter)
	})
}

// A waiter that shares its lane (no try behind its BLPOP) and gives up
// as the release's signal reaches its BLPOP gives the signal back: the
// next waiter, python-redis-lock's here, gets it at once. The round's
// empty result read as a lock won (status 0 was Acquired): the abandoned
// wait sent a release under an empty id instead, and the other waiter
// slept on with the lock free (8 of 150 runs in an outside review).
func TestAbandonedWaitOnASharedLaneGivesTheSignalBack(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	c := s.Client()
	redislock.SetWaitCut(t, c, -1) // as gateWake: the held push is slow, not lost
	var armed atomic.Bool
	gate, popped := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// inFlight counts, per signal key, the BLPOPs sent on c's lanes that
	// have not returned: once every waiter's key is in one, no lane is
	// moving its waiters around (a newcomer displacing a solo waiter, which
	// then takes another lane: see lane.displaced), and only the release
	// or a slice's end can make a lane send again.
	var mu sync.Mutex
	inFlight := map[string]int{}
	count := func(cmd redis.Cmder, n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range cmd.Args()[1:] {
			if k, ok := a.(string); ok {
				inFlight[k] += n
			}
		}
	}
	settled := func(keys ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				if inFlight[k] < 1 {
					return false
				}
			}
			return true
		}
	}
	redislock.AddWaitHook(c, pipelineHook(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, cmd := range cmds {
			if cmd.Name() == "lpush" && armed.Load() { // the abandoned wait's wake push
				<-gate
			}
		}
		if cmds[0].Name() == "blpop" {
			count(cmds[0], 1)
			defer count(cmds[0], -1)
		}
		err := next(ctx, cmds)
		if b, ok := cmds[0].(*redis.Cmd); ok && b.Name() == "blpop" {
			if kv, _ := b.StringSlice(); len(kv) == 2 && kv[0] == "lock-signal:job" {
				once.Do(func() { close(popped) })
			}
		}
		return err
	}))
	defer func() {
		if armed.Load() {
			close(gate)
		}
	}()
	// 8 names waited on through c take its 8 lanes: the next one shares.
	bg, stop := context.WithCancel(ctx)
	others := make([]*redislock.Lock, 8)
	keys := []string{"lock-signal:job"}
	for i := range others {
		name := fmt.Sprint("other-", i)
		mustAcquire(t, ctx, mustNew(t, admin, name))
		others[i] = mustNew(t, c, name)
		redislock.SetMaxSlice(others[i], time.Minute)
		acquireAsync(bg, others[i])
		keys = append(keys, "lock-signal:"+name)
	}
	defer func() {
		stop()
		for _, o := range others {
			_ = o.Settle(ctx)
		}
	}()
	holder := mustNew(t, admin, "job") // no expire: only a release frees it
	mustAcquire(t, ctx, holder)
	quitter := mustNew(t, c, "job")
	redislock.SetMaxSlice(quitter, time.Minute)
	qctx, cancel := context.WithCancel(ctx)
	q := acquireAsync(qctx, quitter)
	within(t, 10*time.Second, "every waiter's key in a BLPOP on c's lanes, the quitter's in a shared one", settled(keys...))
	waitBlocked(t, admin, 8) // those BLPOPs are in Redis
	got := make(chan error, 1)
	go func() { got <- s.Client().BLPop(ctx, 5*time.Second, "lock-signal:job").Err() }()
	waitBlocked(t, admin, 9)
	armed.Store(true)
	cancel()
	if r := receive(t, q); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("quitter's Acquire() = %v, want Canceled", r.err)
	}
	if err := holder.Release(ctx); err != nil { // its signal goes to the shared BLPOP, first in line
		t.Fatal(err)
	}
	select {
	case <-popped:
	case <-time.After(10 * time.Second):
		t.Fatal("the shared BLPOP did not pop the release's signal")
	}
	givenBackAtOnce(t, ctx, func() { armed.Store(false); close(gate) }, got, quitter)
}

// givenBackAtOnce lets the quitter's abandoned wait go on (open) and
// checks that the other waiter's BLPOP (its outcome on got) gets the
// signal the quitter popped within a second, and that the quitter then
// settles.
func givenBackAtOnce(t *testing.T, ctx context.Context, open func(), got <-chan error, quitter *redislock.Lock) {
	t.Helper()
	opened := time.Now()
	open()
	if err := <-got; err != nil || time.Since(opened) > time.Second {
		t.Fatalf("the other waiter's BLPOP: %v after %v; want the signal given back at once", err, time.Since(opened))
	}
	if err := quitter.Settle(ctx); err != nil {
		t.Fatal(err)
	}
}

// When the context ends as the waiter's pipelined try wins (here a hook
// cancels it just as the reply comes in, before go-redis hands it over),
// the context wins: Acquire returns its error and the lock is released
// behind it, so a process told to stop never goes on holding a lock taken
// after it was told. (Should the reply be handed over first and the
// context end before Acquire looks, the context wins too; that window is
// too narrow to force from outside.)
func TestContextWinsOverATryAnsweredAsItEnds(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	holder := mustNew(t, s.Client(), "job")
	mustAcquire(t, ctx, holder)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := s.Client()
	redislock.AddWaitHook(c, pipelineHook(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		err := next(ctx, cmds)
		if len(cmds) > 0 && cmds[0].Name() == "blpop" {
			cancel() // the reply is in, and the caller is told to stop
			time.Sleep(20 * time.Millisecond)
		}
		return err
	}))
	waiter := mustNew(t, c, "job")
	w := acquireAsync(wctx, waiter)
	waitBlocked(t, admin, 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, w); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Acquire() = %v; want context.Canceled: the caller gave up as the try won", r.err)
	}
	if err := waiter.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if owner, _ := holder.OwnerID(ctx); owner != "" {
		t.Fatalf("lock held by %q after the waiter gave up; want it released", owner)
	}
}

// A waiter whose client is closed while it waits takes nothing: its wait
// ran on the runtime's connections, which outlive the client, and the try
// pipelined behind its BLPOP took the lock at the next release, for good
// (Release on the closed client cannot send; without expire the key
// stayed). Now the lock is released again on those connections, which
// wakes the next waiter, and Acquire returns an error matching
// redis.ErrClosed. (Found by review: Acquire returned nil after Close,
// and the key kept the closed waiter's id with no TTL.)
func TestWaiterOnAClosedClientTakesNothing(t *testing.T) {
	quick(t)
	for _, tc := range []struct {
		name string
		opts []redislock.Option
	}{
		{"its own id", nil},
		// A giveback releases only a Lock's own random id: the take of a
		// given id is released by name.
		{"a given id", []redislock.Option{redislock.WithID("worker-7")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			s, admin, holder, c, gone := closingWaiter(t, ctx, tc.opts...) // it waits first: the release's signal is its
			next := mustNew(t, s.Client(), "job", redislock.WithTracking(false))
			got := acquireAsync(ctx, next)
			waitBlocked(t, admin, 2)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if r := receive(t, gone); !errors.Is(r.err, redis.ErrClosed) {
				t.Fatalf("Acquire() on a client closed while waiting = %v; want an error matching redis.ErrClosed", r.err)
			}
			if r := receive(t, got); r.err != nil {
				t.Fatalf("the next waiter: Acquire() = %v; want the lock (the closed waiter's take given back)", r.err)
			}
			if owner := admin.Get(ctx, "lock:job").Val(); owner != next.ID() {
				t.Fatalf("lock:job holds %q, want the next waiter's %q", owner, next.ID())
			}
		})
	}
}

// And one whose lock is never released stops waiting at the end of its
// BLPOP's slice (2 s with go-redis's default read timeout), instead of
// waiting on the runtime's connections until its context ends. (Found by
// review: it waited out its 30 s context.)
func TestWaiterOnAClosedClientStopsWaiting(t *testing.T) {
	t.Parallel()
	_, _, _, c, gone := closingWaiter(t, ctxT(t))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-gone:
		if !errors.Is(r.err, redis.ErrClosed) {
			t.Fatalf("Acquire() on a client closed while waiting = %v; want an error matching redis.ErrClosed", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire() still waiting 10 s after its client was closed; want it to end within its slice (2 s)")
	}
}

// An RWMutex's waiters whose client is closed while they wait leave
// nothing behind in Redis: the writer's registration (which kept every
// new reader out until it lapsed, 3 s) and the admission of the readers
// (which kept the waiting writer out) are taken back on the runtime's
// connections, as what their tries took is (found by review).
func TestRWWaitersOnAClosedClientLeaveNoRegistration(t *testing.T) {
	t.Parallel()
	t.Run("a writer", func(t *testing.T) {
		s, ctx, _ := started(t)
		w1 := mustRWMutex(t, s.Client(), "cfg")
		if err := w1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		c := s.Client()
		w2 := mustRWMutex(t, c, "cfg")
		got := make(chan error, 1)
		go func() { got <- w2.Lock(ctx) }()
		waitInfo(t, ctx, w1, "W2 registered", func(i rwInfo) bool { return i.WaitingWriters == 1 })
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-got; !errors.Is(err, redis.ErrClosed) {
			t.Fatalf("Lock() on a client closed while waiting = %v; want an error matching redis.ErrClosed", err)
		}
		if err := w2.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		if i, err := w1.Info(ctx); err != nil || i.WaitingWriters != 0 {
			t.Fatalf("Info() = %+v, %v after the closed writer settled; want no waiting writer", i, err)
		}
	})
	t.Run("admitted readers", func(t *testing.T) {
		s, ctx, _ := started(t)
		w1, w2 := mustRWMutex(t, s.Client(), "cfg"), mustRWMutex(t, s.Client(), "cfg")
		if err := w1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		c := s.Client()
		r := mustRWMutex(t, c, "cfg")
		rgot := make(chan error, 1)
		go func() { rgot <- r.RLock(ctx) }()
		waitInfo(t, ctx, w1, "the reader registered", func(i rwInfo) bool { return i.WaitingReaders == 1 })
		wgot := make(chan error, 1)
		go func() { wgot <- w2.Lock(ctx) }()
		waitInfo(t, ctx, w1, "W2 registered", func(i rwInfo) bool { return i.WaitingWriters == 1 })
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w1.Unlock(ctx); err != nil { // admits the reader, whose try comes in on the runtime
			t.Fatal(err)
		}
		if err := <-rgot; !errors.Is(err, redis.ErrClosed) {
			t.Fatalf("RLock() on a client closed while waiting = %v; want an error matching redis.ErrClosed", err)
		}
		if err := r.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		if i, err := w1.Info(ctx); err != nil || i.AdmittedReaders != 0 || len(i.Readers) != 0 {
			t.Fatalf("Info() = %+v, %v after the closed reader settled; want no reader, none admitted", i, err)
		}
		if err := <-wgot; err != nil {
			t.Fatalf("W2's Lock() = %v", err)
		}
	})
}

// closingWaiter starts a server where admin's Lock "job" is held by
// holder, and a waiter on a client c of its own (to be closed), blocked in
// BLPOP, made with opts; gone is its Acquire's outcome.
func closingWaiter(t *testing.T, ctx context.Context, opts ...redislock.Option) (s *redistest.Server, admin *redis.Client, holder *redislock.Lock, c *redis.Client, gone <-chan acquired) {
	t.Helper()
	s = redistest.Start(t)
	admin = s.Client()
	holder = mustNew(t, admin, "job")
	mustAcquire(t, ctx, holder)
	c = s.Client()
	gone = acquireAsync(ctx, mustNew(t, c, "job", append([]redislock.Option{redislock.WithTracking(false)}, opts...)...))
	waitBlocked(t, admin, 1)
	return s, admin, holder, c, gone
}

// A reader that gives up as a writer's release admits its client's
// readers, and whose abandoned BLPOP and try took the admission's signal
// and came in, hands the signal on with the read it releases: the next
// reader of its client, of the same admitted generation, is woken by it
// and comes in. Its release alone woke nobody: that reader slept out its
// slice while the admission kept the waiting writer out (readers giving
// up in a loop on one client: the writer stalled about 2 s, 4 times in
// 10 s).
func TestAbandonedReaderHandsTheAdmissionOn(t *testing.T) {
	s, ctx, admin := started(t)
	w1, w2 := mustRWMutex(t, s.Client(), "cfg"), mustRWMutex(t, s.Client(), "cfg")
	if err := w1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	c, open := gateWake(t, s)
	defer open()
	quitter := mustRWMutex(t, c, "cfg", redislock.WithID("quitter")) // its abandoned read permit's id
	qctx, cancel := context.WithCancel(ctx)
	q := make(chan error, 1)
	go func() { q <- quitter.RLock(qctx) }()
	waitBlocked(t, admin, 1)
	wakes := &wakeCounter{}
	next := mustRWMutex(t, c, "cfg", redislock.WithObserver(wakes.observer()))
	n := make(chan error, 1)
	go func() { n <- next.RLock(ctx) }()
	within(t, 10*time.Second, "the second reader queues behind the first", func() bool { return redislock.QueuedWaiters() == 2 })
	wl := make(chan error, 1)
	go func() { wl <- w2.Lock(ctx) }()
	waitInfo(t, ctx, w1, "W2 registered", func(i rwInfo) bool { return i.WaitingWriters == 1 })
	cancel()
	if err := <-q; !errors.Is(err, context.Canceled) {
		t.Fatalf("quitter's RLock() = %v, want Canceled", err)
	}
	waitBlocked(t, admin, 3)               // the abandoned BLPOP, the next reader's, W2's
	if err := w1.Unlock(ctx); err != nil { // the abandoned BLPOP takes the readers' signal, its try comes in
		t.Fatal(err)
	}
	waitInfo(t, ctx, w1, "the abandoned wait's try came in", func(i rwInfo) bool {
		return len(i.Readers) == 1 && i.Readers[0].ID == quitter.ID()
	})
	open() // the abandoned wait ends: its read is released
	select {
	case err := <-n:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the next reader did not come in within 20 s")
	}
	if got := wakes.timeout.Load(); got != 0 || wakes.signal.Load() != 1 {
		t.Fatalf("the next reader was woken %d times by a signal and %d by its slice's end; want once, by the signal the abandoned reader handed on", wakes.signal.Load(), got)
	}
	if err := quitter.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := next.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-wl; err != nil {
		t.Fatalf("W2's Lock() = %v", err)
	}
}
