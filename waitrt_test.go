package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// waitingConns returns how many connections of a real server are blocked
// in BLPOP, and how many connections it has in all.
func waitingConns(t testing.TB, admin *redis.Client) (blpop, all int) {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		all++
		if strings.Contains(line, " cmd=blpop ") && strings.Contains(line, " flags=b ") {
			blpop++
		}
	}
	return blpop, all
}

// within polls ok every few milliseconds until it holds, failing t after d.
func within(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}

// A waiter never holds a connection of the caller's pool: with PoolSize 1,
// a holder's Release and Extend on the same client go through at once
// while another Lock of that client waits in Redis (they queued behind its
// BLPOP for up to a whole slice, and a renewal could miss its deadline).
func TestWaitingLeavesThePoolAlone(t *testing.T) {
	quick(t)
	ctx := ctxT(t)
	s := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	other := mustNew(t, s.Client(), "busy")
	mustAcquire(t, ctx, other) // no expire: the waiter's slices are the longest (2 s)

	waiter := mustNew(t, c, "busy")
	waitDone := acquireAsync(ctx, waiter)
	waitBlocked(t, s.Client(), 1)

	holder := mustNew(t, c, "mine", redislock.WithExpire(time.Minute))
	for i := range 3 {
		// Each call gets far less than a slice: queued behind the BLPOP
		// it would run out of time.
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := holder.Acquire(cctx)
		if err == nil {
			err = holder.Extend(cctx, time.Minute)
		}
		if err == nil {
			err = holder.Release(cctx)
		}
		cancel()
		if err != nil {
			t.Fatalf("round %d: the holder on the waiter's client: %v", i, err)
		}
	}
	if st := c.PoolStats(); st.Timeouts != 0 {
		t.Errorf("PoolStats().Timeouts = %d, want 0", st.Timeouts)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-waitDone; r.err != nil {
		t.Fatalf("the waiter: Acquire() = %v", r.err)
	}
}

// A waiter's rounds send nothing through the hooks of the caller's
// client (a user's tracing hook records every command it sees): its BLPOP
// and the try behind it run on the library's own connections, and whether
// the client was closed meanwhile is read from its pool, not probed with a
// command (a PING with an ended context, seen by the hook as a failed
// PING, once per round).
func TestWaitSendsNothingThroughTheCallersHooks(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	holder := mustNew(t, admin, "job")
	mustAcquire(t, ctx, holder)
	c := s.Client()
	waiter := mustNew(t, c, "job", redislock.WithTracking(false))
	if err := waiter.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("TryAcquire() = %v, want ErrLocked", err) // the client has a connection now
	}
	var mu sync.Mutex
	var seen []string
	c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		mu.Lock()
		seen = append(seen, cmd.Name())
		mu.Unlock()
		return next(ctx, cmd)
	}))
	got := acquireAsync(ctx, waiter)
	waitBlocked(t, admin, 1)
	mu.Lock()
	seen = nil // the first try, sent on the client
	mu.Unlock()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, got); r.err != nil {
		t.Fatalf("Acquire() = %v", r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Fatalf("the caller's hooks saw %q while the waiter waited and was woken; want nothing", seen)
	}
}

// wakeCounter is an Observer that counts its waiters' wake-ups by cause.
type wakeCounter struct {
	signal, timeout atomic.Int64
}

func (w *wakeCounter) observer() *redislock.Observer { return &redislock.Observer{Wakeup: w.Wakeup} }

func (w *wakeCounter) Wakeup(_ context.Context, e redislock.Event) {
	if e.Woken {
		w.signal.Add(1)
	} else {
		w.timeout.Add(1)
	}
}

// Many goroutines waiting on many names through one client (go-redis's
// default options) wait on a few connections of the library's own: at
// most 8 blocked in BLPOP, no pool timeout, and a renewing holder on the
// same client keeps its lock. Every release wakes its own waiter (by its
// signal, not at the end of a slice), whether or not that waiter shares
// its connection with others, and the waiters that gave up meanwhile
// leave the others waiting.
func TestManyWaitersShareFewConnections(t *testing.T) {
	const names = 200
	ctx := ctxT(t)
	s := redistest.Start(t)
	admin := s.Client()
	shared := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { shared.Close() })

	renewing := mustNew(t, shared, "renewing", redislock.WithExpire(600*time.Millisecond), redislock.WithAutoRenewal())
	mustAcquire(t, ctx, renewing)

	holders := make([]*redislock.Lock, names)
	for i := range holders {
		holders[i] = mustNew(t, admin, fmt.Sprint("job-", i))
		mustAcquire(t, ctx, holders[i])
	}
	wakes := &wakeCounter{}
	gaveUp := make([]context.CancelFunc, names)
	results := make([]<-chan acquired, names)
	waiters := make([]*redislock.Lock, names)
	for i := range waiters {
		waiters[i] = mustNew(t, shared, fmt.Sprint("job-", i), redislock.WithObserver(wakes.observer()))
		wctx, cancel := context.WithCancel(ctx)
		gaveUp[i] = cancel
		results[i] = acquireAsync(wctx, waiters[i])
	}
	within(t, 10*time.Second, "every waiter queued", func() bool { return redislock.WaitQueues() >= names })
	within(t, 10*time.Second, "the waits blocked in Redis", func() bool { n, _ := waitingConns(t, admin); return n > 0 })

	// Long enough for the renewing hold to renew twice, with its
	// deadline at 600 ms: renewals queued behind BLPOPs would miss it.
	for range 4 {
		time.Sleep(300 * time.Millisecond)
		blpop, all := waitingConns(t, admin)
		if blpop > 8 {
			t.Errorf("%d connections blocked in BLPOP for %d waiters, want at most 8", blpop, names)
		}
		t.Logf("connections: %d blocked in BLPOP, %d in all (%d waiters)", blpop, all, names)
	}
	if err := renewing.Err(); err != nil {
		t.Fatalf("the renewing holder on the waiters' client: Err() = %v", err)
	}
	if st := shared.PoolStats(); st.Timeouts != 0 {
		t.Errorf("PoolStats().Timeouts = %d, want 0", st.Timeouts)
	}

	// A tenth give up; the rest are woken by their releases.
	for i := 0; i < names; i += 10 {
		gaveUp[i]()
		if r := <-results[i]; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("waiter %d given up: Acquire() = %v, want context.Canceled", i, r.err)
		}
	}
	timeoutsBefore := wakes.timeout.Load()
	released := time.Now()
	for _, h := range holders {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var last time.Time
	for i, ch := range results {
		if i%10 == 0 {
			continue
		}
		r := <-ch
		if r.err != nil {
			t.Fatalf("waiter %d: Acquire() = %v", i, r.err)
		}
		if r.at.After(last) {
			last = r.at
		}
	}
	t.Logf("from the first release to the last of %d waiters in: %v", names-names/10, last.Sub(released))
	if n := wakes.signal.Load(); n < names-names/10 {
		t.Errorf("%d wake-ups by a signal, want one per waiter (%d)", n, names-names/10)
	}
	// Slices ended while the waiters waited (a slice is 2 s at most), but
	// after the releases each waiter is woken by its signal: a waiter
	// that missed its own would be woken at the end of a slice.
	if n := wakes.timeout.Load() - timeoutsBefore; n > int64(names/10) {
		t.Errorf("%d waiters woken by the end of a slice after the releases; want them woken by their signals", n)
	}
	for i, l := range waiters {
		if i%10 != 0 {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Shutdown stops the wait runtimes of the clients it is given (all, given
// none): a wait in Redis at that moment ends with redis.ErrClosed, and so
// do the waiters of the same client queued behind it in this process; a
// wait on another client goes on, and the next wait starts a new runtime.
// (The package's leak check, after Shutdown(), finds nothing of them
// left.) (Found by review: only the head of each local queue ended; the
// next became head and started a new runtime.)
func TestShutdownStopsWaits(t *testing.T) {
	ctx := ctxT(t)
	s := redistest.Start(t)
	holder := mustNew(t, s.Client(), "job")
	mustAcquire(t, ctx, holder)
	c1, c2 := s.Client(), s.Client()
	stopped, other := mustNew(t, c1, "job"), mustNew(t, c2, "job")
	stoppedDone := acquireAsync(ctx, stopped)
	waitBlocked(t, s.Client(), 1)
	var queued []<-chan acquired // behind stopped, in this process
	for range 3 {
		queued = append(queued, acquireAsync(ctx, mustNew(t, c1, "job")))
	}
	otherDone := acquireAsync(ctx, other)
	waitBlocked(t, s.Client(), 2)
	within(t, 10*time.Second, "every waiter queued", func() bool { return redislock.QueuedWaiters() >= 5 })
	redislock.Shutdown(c1)
	if r := <-stoppedDone; !errors.Is(r.err, redis.ErrClosed) || !strings.Contains(r.err.Error(), "Shutdown") {
		t.Fatalf("Acquire() waiting at Shutdown = %v, want redis.ErrClosed, saying Shutdown closed it (the client is open)", r.err)
	}
	for i, ch := range queued {
		select {
		case r := <-ch:
			if !errors.Is(r.err, redis.ErrClosed) {
				t.Fatalf("queued waiter %d: Acquire() = %v after Shutdown, want redis.ErrClosed", i, r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("queued waiter %d still waiting 5 s after Shutdown", i)
		}
	}
	if redislock.HasWaitRuntime(c1) {
		t.Fatal("a wait runtime of the shut client runs again: a queued waiter started one")
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-otherDone; r.err != nil {
		t.Fatalf("Acquire() on another client = %v", r.err)
	}
	again := acquireAsync(ctx, stopped)
	waitBlocked(t, s.Client(), 1)
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-again; r.err != nil {
		t.Fatalf("Acquire() after Shutdown = %v", r.err)
	}
	if err := stopped.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A client's wait runtime winds down by itself once its last wait ended
// (here after 200 ms instead of 30 s): its connections are closed and it
// leaves the registry; the next wait starts a new one. So does the runtime
// of a client type the library knows no options of (a wrapper: its waits
// run on the client itself), which has no connections to close: it stayed
// in the registry, keeping every such client for good.
func TestWaitRuntimeWindsDown(t *testing.T) {
	s := redistest.Start(t)
	t.Run("client", func(t *testing.T) { waitRuntimeWindsDown(t, s, s.Client()) })
	t.Run("wrapper", func(t *testing.T) { waitRuntimeWindsDown(t, s, wrapperClient{s.Client()}) })
}

// wrapperClient is a client of a type the library has no options of.
type wrapperClient struct{ redis.UniversalClient }

func waitRuntimeWindsDown(t *testing.T, s *redistest.Server, c redis.UniversalClient) {
	redislock.SetRuntimeIdle(t, c, 200*time.Millisecond)
	ctx := ctxT(t)
	admin := s.Client()
	// No key watch: its connections would come and go too.
	holder := mustNew(t, admin, "job", redislock.WithTracking(false))
	waiter := mustNew(t, c, "job", redislock.WithTracking(false))
	_, own := c.(*redis.Client)
	for round := range 2 {
		mustAcquire(t, ctx, holder)
		done := acquireAsync(ctx, waiter)
		waitBlocked(t, admin, 1)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil {
			t.Fatalf("round %d: Acquire() = %v", round, r.err)
		}
		if err := waiter.Release(ctx); err != nil {
			t.Fatal(err)
		}
		_, peak := waitingConns(t, admin)
		within(t, 5*time.Second, "the runtime closed, with its connection", func() bool {
			_, now := waitingConns(t, admin)
			return !redislock.HasWaitRuntime(c) && (now < peak || !own)
		})
	}
}

// heldNames holds n locks named prefix-0... on c (no expire) and returns
// them.
func heldNames(t *testing.T, ctx context.Context, c *redis.Client, prefix string, n int) []*redislock.Lock {
	t.Helper()
	held := make([]*redislock.Lock, n)
	for i := range held {
		held[i] = mustNew(t, c, fmt.Sprint(prefix, "-", i))
		mustAcquire(t, ctx, held[i])
	}
	return held
}

// One waiter more than there are wait connections (9 names, 8 lanes) makes
// two share a lane, once: the waiter whose BLPOP the newcomer woke comes
// back beside it. (It moved on to the next lane with one waiter, woke that
// one, and so on: 516 BLPOPs, tries and wake-ups a second, for ever.) The
// connections' own client ignores the caller's pool caps (MaxIdleConns 1
// made that loop dial 2,000 connections a second).
func TestWaitersBeyondTheLanesDoNotChurn(t *testing.T) {
	const n = 9
	ctx := ctxT(t)
	s := redistest.Start(t)
	admin := s.Client()
	held := heldNames(t, ctx, admin, "job", n)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxIdleConns: 1})
	t.Cleanup(func() { c.Close() })
	results := make([]<-chan acquired, n)
	for i := range results {
		results[i] = acquireAsync(ctx, mustNew(t, c, fmt.Sprint("job-", i)))
	}
	within(t, 10*time.Second, "every waiter queued", func() bool { return redislock.WaitQueues() >= n })
	time.Sleep(500 * time.Millisecond) // settled
	before, from := commandStats(t, admin), time.Now()
	time.Sleep(2 * time.Second)
	after := commandStats(t, admin)
	perSec := func(cmd string) float64 { return float64(after[cmd]-before[cmd]) / time.Since(from).Seconds() }
	t.Logf("%d waiters on 8 lanes: %.1f BLPOP/s, %.1f EVALSHA/s, %.1f LPUSH/s", n, perSec("blpop"), perSec("evalsha"), perSec("lpush"))
	if perSec("blpop") > 20 || perSec("lpush") > 5 {
		t.Errorf("%.1f BLPOP/s and %.1f wake-ups/s for %d waiters whose locks nobody releases; want a few a second", perSec("blpop"), perSec("lpush"), n)
	}
	for i, h := range held {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-results[i]; r.err != nil {
			t.Fatalf("waiter %d: Acquire() = %v", i, r.err)
		}
	}
}

// A signal key that is not a list fails the BLPOP of every name on its
// lane: only its own waiter is told (WRONGTYPE); the others wait on, on at
// most 8 connections, and are woken by their releases. (Each was sent on a
// lane of its own to find out, beyond the 8, and some then took seconds
// to be woken.)
func TestABadKeyOnASharedLaneFailsOnlyItsWaiter(t *testing.T) {
	const n = 12 // more names than lanes: some share
	ctx := ctxT(t)
	s := redistest.Start(t)
	admin := s.Client()
	held := heldNames(t, ctx, admin, "job", n)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	results := make([]<-chan acquired, n)
	waiters := make([]*redislock.Lock, n)
	start := func(i int) {
		waiters[i] = mustNew(t, c, fmt.Sprint("job-", i))
		results[i] = acquireAsync(ctx, waiters[i])
	}
	// The bad one comes last, once every lane is taken: it shares a lane
	// (the broken variant fails its lane-mates only when it does).
	const bad = n - 1
	for i := range bad {
		start(i)
	}
	within(t, 10*time.Second, "every waiter queued", func() bool { return redislock.WaitQueues() >= bad })
	within(t, 10*time.Second, "the waits blocked in Redis", func() bool { k, _ := waitingConns(t, admin); return k == 8 })
	start(bad)
	within(t, 10*time.Second, "the last waiter queued", func() bool { return redislock.WaitQueues() >= n })
	if err := admin.Set(ctx, fmt.Sprint("lock-signal:job-", bad), "not a list", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.LPush(ctx, fmt.Sprint("lock-signal:job-", bad, ":poke"), "x").Err(); err != nil { // nothing to do with it
		t.Fatal(err)
	}
	if r := receive(t, results[bad]); r.err == nil || !strings.Contains(r.err.Error(), "WRONGTYPE") {
		t.Fatalf("the waiter on the bad key: Acquire() = %v, want WRONGTYPE", r.err)
	}
	if k, _ := waitingConns(t, admin); k > 8 {
		t.Errorf("%d connections in BLPOP after the error, want at most 8", k)
	}
	for i, h := range held {
		if i == bad {
			continue
		}
		released := time.Now()
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := receive(t, results[i])
		if r.err != nil {
			t.Fatalf("waiter %d: Acquire() = %v", i, r.err)
		}
		if took := r.at.Sub(released); took > time.Second {
			t.Errorf("waiter %d in %v after its release; want it woken at once", i, took)
		}
	}
	// (Not counted: that each was woken by popping its signal. One whose
	// round ended as its release came, under load, gets in by the try
	// that starts its next round, at once all the same: the soak saw 10
	// of 11.)
}

// The caller's pool caps (PoolSize, MaxIdleConns, and MaxActiveConns in
// go-redis releases that have it) do not cap the wait connections: with
// all of them at 1, eight waiters wait together and each is woken by its
// release. (An outside review saw MaxActiveConns inherited on go-redis
// v9.23; there pipelines also have a pool of their own, which this test
// does not get to cap, so it shows the reset only where the main pool
// carries the waits.)
func TestWaitsIgnoreThePoolCaps(t *testing.T) {
	quick(t)
	const n = 8
	ctx := ctxT(t)
	s := redistest.Start(t)
	admin := s.Client()
	held := heldNames(t, ctx, admin, "job", n)
	o := &redis.Options{Addr: s.Addr, PoolSize: 1, MaxIdleConns: 1}
	if f := reflect.ValueOf(o).Elem().FieldByName("MaxActiveConns"); f.IsValid() {
		f.SetInt(1)
		t.Log("MaxActiveConns: 1")
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	results := make([]<-chan acquired, n)
	for i := range results {
		results[i] = acquireAsync(ctx, mustNew(t, c, fmt.Sprint("job-", i)))
	}
	within(t, 10*time.Second, "every waiter in BLPOP", func() bool { k, _ := waitingConns(t, admin); return k == n })
	for i, h := range held {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if r := receive(t, results[i]); r.err != nil {
			t.Fatalf("waiter %d: Acquire() = %v", i, r.err)
		}
	}
}

// A runtime whose waits keep coming keeps its connection: its idle time
// counts from its last wait, not its first (one timer serves it, re-armed
// for the rest of the idle time when it fires). Here waits come every
// 90-130 ms for three times the idle time (400 ms), and every one runs on
// the same connection. (The pauses vary so that the timer's firings, an
// idle time after a wait, do not all fall on a wait in progress, which
// would hide a timer that closes the runtime from its first wait.)
func TestWaitRuntimeInUseDoesNotWindDown(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	admin, c := s.Client(), s.Client()
	const idle = 400 * time.Millisecond
	redislock.SetRuntimeIdle(t, c, idle)
	holder := mustNew(t, admin, "job", redislock.WithTracking(false))
	waiter := mustNew(t, c, "job", redislock.WithTracking(false))
	first, prev := "", time.Time{}
	checked := 0
	for i, began := 0, time.Now(); time.Since(began) < 3*idle; i++ {
		time.Sleep(time.Duration(90+i*17%40) * time.Millisecond)
		mustAcquire(t, ctx, holder)
		start := time.Now()
		done := acquireAsync(ctx, waiter)
		id := blockedConnID(t, admin)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil {
			t.Fatal(r.err)
		}
		if err := waiter.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// The runtime was idle for less than start-prev.
		if first != "" && start.Sub(prev) < idle {
			checked++
			if id != first {
				t.Fatalf("wait %d ran on connection %s, the first on %s: the runtime wound down while in use", checked, id, first)
			}
		}
		if first == "" {
			first = id
		}
		prev = start
	}
	if checked < 6 {
		t.Fatalf("only %d waits came within the idle time of the one before (a loaded machine?)", checked)
	}
}

// blockedConnID waits for one connection blocked in BLPOP and returns its
// client id.
func blockedConnID(t *testing.T, admin *redis.Client) string {
	t.Helper()
	id := ""
	within(t, 10*time.Second, "a connection blocked in BLPOP", func() bool {
		list, err := admin.ClientList(context.Background()).Result()
		if err != nil {
			t.Fatalf("CLIENT LIST: %v", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			if strings.Contains(line, " cmd=blpop ") && strings.Contains(line, " flags=b ") {
				id, _, _ = strings.Cut(line, " ")
				return true
			}
		}
		return false
	})
	return id
}
