package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/cache"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// 8 processes × 32 goroutines ask for one cold key whose compute takes
// 200 ms: it runs once, every caller gets the value, and each process
// sends a handful of round trips while it waits, not a polling loop.
func TestCacheComputesOnceAcrossProcesses(t *testing.T) {
	b := realBackend(t)
	s := b.client()
	addr := s.Options().Addr
	const procs, goroutines = 8, 32
	var cmds []*exec0
	for range procs {
		cmd := worker(t, "cache", "W_ADDR="+addr, "W_NAME=report", "W_GOROUTINES="+strconv.Itoa(goroutines))
		cmds = append(cmds, &exec0{cmd: cmd, out: redistest.StartProcess(t, cmd)})
	}
	results := map[string]int{}
	var sents []int
	defer func() { t.Logf("round trips per process: %v; results %v", sents, results) }()
	for i, w := range cmds {
		lines := w.lines(t)
		if len(lines) != goroutines+2 || lines[0] != "ready" {
			t.Fatalf("worker %d printed %q", i, lines)
		}
		for _, l := range lines[1 : goroutines+1] {
			res, rest, _ := strings.Cut(l, " ")
			if rest != `"the value" <nil>` {
				t.Fatalf("worker %d: a caller got %q", i, l)
			}
			results[res]++
		}
		sent, _ := strconv.Atoi(strings.TrimPrefix(lines[goroutines+1], "sent "))
		sents = append(sents, sent)
		// A read (1), a try (1), the wait with its try (1 per slice, at
		// most 2 s each), the read after (1), the release (1), the
		// process's tracker (a few): no polling.
		if sent > 15 {
			t.Errorf("worker %d sent %d round trips for one key, want a handful", i, sent)
		}
	}
	if n, _ := s.Get(context.Background(), "report:computes").Int(); n != 1 {
		t.Fatalf("the compute ran %d times, want once", n)
	}
	if results["computed"] != 1 || results["computed"]+results["shared"]+results["hit"] != procs*goroutines {
		t.Fatalf("results %v: want 1 computed and the rest shared or hit", results)
	}
}

// A failing compute: nothing is stored, the callers that shared it get its
// error, and the next caller computes once.
func TestCacheFailingCompute(t *testing.T) {
	onBoth(t, func(t *testing.T, b *backend) {
		ctx := ctxT(t)
		cc := mustCache(t, b.client())
		boom := errors.New("boom")
		started, finish := make(chan struct{}), make(chan struct{})
		var computes atomic.Int32
		failing := func(ctx context.Context) ([]byte, error) {
			computes.Add(1)
			close(started)
			<-finish
			return nil, boom
		}
		var wg sync.WaitGroup
		errs := make([]error, 5)
		wg.Add(1)
		go func() { defer wg.Done(); _, _, errs[0] = cc.GetOrCompute(ctx, "k", time.Minute, failing) }()
		<-started
		for i := 1; i < 5; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = cc.GetOrCompute(ctx, "k", time.Minute, failing)
			}()
		}
		time.Sleep(50 * time.Millisecond) // let the four join the flight (they share it whenever they come)
		close(finish)
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, boom) {
				t.Errorf("caller %d: %v, want the compute's error", i, err)
			}
		}
		if n := computes.Load(); n != 1 {
			t.Fatalf("%d computes, want 1", n)
		}
		if n := b.client().Exists(ctx, "k").Val(); n != 0 {
			t.Fatalf("a failed compute stored a value")
		}
		v, res, err := cc.GetOrCompute(ctx, "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
		if err != nil || res != cache.Computed || string(v) != "ok" {
			t.Fatalf("next call = %q, %v, %v; want ok, computed", v, res, err)
		}
		v, res, err = cc.GetOrCompute(ctx, "k", time.Minute, failing)
		if err != nil || res != cache.Hit || string(v) != "ok" {
			t.Fatalf("then = %q, %v, %v; want ok, hit", v, res, err)
		}
	})
}

// A compute whose lock is lost mid-way stores nothing and reports the loss;
// the value of the next holder stands. Lost as a Reset would (the key
// deleted), and taken over by another owner.
func TestCacheLostLockStoresNothing(t *testing.T) {
	b := realBackend(t)
	for _, how := range []string{"deleted", "taken"} {
		t.Run(how, func(t *testing.T) {
			ctx := ctxT(t)
			admin := b.client()
			key := "doc:" + how
			a := mustCache(t, b.client())
			other := mustCache(t, b.client())
			v, res, err := a.GetOrCompute(ctx, key, time.Minute, func(fctx context.Context) ([]byte, error) {
				lockKey := lockKey(key)
				switch how {
				case "deleted":
					admin.Del(ctx, lockKey)
					// the next caller computes and stores its value
					if v, res, err := other.GetOrCompute(ctx, key, time.Minute, func(context.Context) ([]byte, error) { return []byte("newer"), nil }); err != nil || res != cache.Computed || string(v) != "newer" {
						t.Errorf("the other caller = %q, %v, %v", v, res, err)
					}
				case "taken":
					admin.Set(ctx, lockKey, "someone-else", time.Minute)
					admin.Set(ctx, key, "\xffRLC1v\x00\x00\x00\x00\x00\x00\xea\x60newer", time.Minute) // as GetOrCompute stores it
				}
				<-fctx.Done() // the watch tells at once
				if !errors.Is(context.Cause(fctx), redislock.ErrLost) {
					t.Errorf("fn's context cause = %v, want ErrLost", context.Cause(fctx))
				}
				return []byte("stale"), nil
			})
			if !errors.Is(err, redislock.ErrLost) || v != nil {
				t.Fatalf("GetOrCompute with its lock lost = %q, %v, %v; want an error matching ErrLost", v, res, err)
			}
			v, res, err = other.GetOrCompute(ctx, key, time.Minute, func(context.Context) ([]byte, error) { return []byte("recomputed"), nil })
			if err != nil || string(v) != "newer" || res != cache.Hit {
				t.Fatalf("after: %q, %v, %v; want the newer value, a hit", v, res, err)
			}
		})
	}
}

// The store checks the lock in the same script: a compute that never
// noticed its loss (no watch, fn ignores its context) still stores
// nothing.
func TestCacheStoreChecksTheLock(t *testing.T) {
	b := realBackend(t)
	ctx := ctxT(t)
	admin := b.client()
	cc := mustCache(t, b.client(), cache.WithLockOptions(redislock.WithTracking(false)))
	_, _, err := cc.GetOrCompute(ctx, "k", time.Minute, func(context.Context) ([]byte, error) {
		admin.Set(ctx, "lock:"+cache.LockName("k"), "someone-else", time.Minute)
		return []byte("late"), nil
	})
	if !errors.Is(err, redislock.ErrLost) {
		t.Fatalf("GetOrCompute = %v, want ErrLost", err)
	}
	if n := admin.Exists(ctx, "k").Val(); n != 0 {
		t.Fatalf("the late compute stored its value")
	}
}

// Negative caching: ErrNoValue is cached for WithNegativeTTL, and not at
// all without it.
func TestCacheNegative(t *testing.T) {
	onBoth(t, func(t *testing.T, b *backend) {
		ctx := ctxT(t)
		var computes atomic.Int32
		absent := func(context.Context) ([]byte, error) { computes.Add(1); return nil, cache.ErrNoValue }
		plain := mustCache(t, b.client())
		for range 2 {
			if _, _, err := plain.GetOrCompute(ctx, "gone", time.Minute, absent); !errors.Is(err, cache.ErrNoValue) {
				t.Fatalf("GetOrCompute = %v, want ErrNoValue", err)
			}
		}
		if n := computes.Swap(0); n != 2 {
			t.Fatalf("without negative TTL: %d computes, want 2", n)
		}
		neg := mustCache(t, b.client(), cache.WithNegativeTTL(time.Minute))
		for i := range 3 {
			_, res, err := neg.GetOrCompute(ctx, "gone", time.Minute, absent)
			want := cache.Hit
			if i == 0 {
				want = cache.Computed
			}
			if !errors.Is(err, cache.ErrNoValue) || res != want {
				t.Fatalf("call %d = %v, %v; want ErrNoValue, %v", i, res, err, want)
			}
		}
		if n := computes.Load(); n != 1 {
			t.Fatalf("with negative TTL: %d computes, want 1", n)
		}
		if ttl := b.client().PTTL(ctx, "gone").Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("the absence's TTL = %v, want the negative TTL", ttl)
		}
	})
}

// Stale mode: after the soft TTL, 1,000 reads get the stale value at once
// while exactly one refresh runs; then the fresh value is served.
func TestCacheStaleWhileRevalidate(t *testing.T) {
	b := realBackend(t)
	ctx := ctxT(t)
	cc := mustCache(t, b.client(), cache.WithStaleAfter(100*time.Millisecond))
	other := mustCache(t, b.client(), cache.WithStaleAfter(100*time.Millisecond)) // another process's
	var computes atomic.Int32
	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before the caches' Close, which waits for the refresh
	fn := func(context.Context) ([]byte, error) {
		n := computes.Add(1)
		if n > 1 {
			<-release // the refresh is slow
		}
		return []byte("v" + strconv.Itoa(int(n))), nil
	}
	if _, res, err := cc.GetOrCompute(ctx, "hot", time.Minute, fn); err != nil || res != cache.Computed {
		t.Fatalf("first = %v, %v", res, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for { // until the soft TTL, on the server's clock, has passed
		_, res, err := cc.GetOrCompute(ctx, "hot", time.Minute, fn)
		if err != nil {
			t.Fatal(err)
		}
		if res == cache.Stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never stale")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var wg sync.WaitGroup
	var stale atomic.Int32
	for i := range 1000 {
		c := cc
		if i%2 == 1 {
			c = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, res, err := c.GetOrCompute(ctx, "hot", time.Minute, fn)
			if err == nil && res == cache.Stale && string(v) == "v1" {
				stale.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := stale.Load(); n != 1000 {
		t.Fatalf("%d of 1000 reads got the stale value, want all", n)
	}
	// The refresh started in the background: it reaches its compute.
	for deadline := time.Now().Add(5 * time.Second); computes.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := computes.Load(); n != 2 {
		t.Fatalf("%d computes during the stale reads, want the first and one refresh", n)
	}
	letGo()
	deadline = time.Now().Add(5 * time.Second)
	for { // the refresh stores v2, fresh
		v, res, err := other.GetOrCompute(ctx, "hot", time.Minute, fn)
		if err == nil && res == cache.Hit && string(v) == "v2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the refresh was let go: %q, %v, %v; want v2, hit", v, res, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := computes.Load(); n != 2 {
		t.Fatalf("%d computes in all, want 2", n)
	}
}

// The wire: a python-redis-lock process holding lock:get_or_set:<key>
// makes GetOrCompute wait, and a Python waiter is woken by GetOrCompute's
// release.
func TestCachePythonInterop(t *testing.T) {
	b := realBackend(t)
	ctx := ctxT(t)
	admin := b.client()
	py := redistest.PyLock{C: admin, Name: cache.LockName("report"), ID: "py-holder", Expire: 60}
	if !py.Acquire(ctx, false, 0) {
		t.Fatal("the Python-style holder did not get the free lock")
	}
	cc := mustCache(t, b.client())
	got := make(chan error, 1)
	go func() {
		_, res, err := cc.GetOrCompute(ctx, "report", time.Minute, func(context.Context) ([]byte, error) { return []byte("go"), nil })
		if err == nil && res != cache.Computed {
			err = fmt.Errorf("result %v, want computed", res)
		}
		got <- err
	}()
	redistest.WaitBlocked(t, admin, 1)
	select {
	case err := <-got:
		t.Fatalf("GetOrCompute returned %v while Python held the lock", err)
	default:
	}
	if n := py.Release(ctx); n != 0 {
		t.Fatalf("Python release = %d", n)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	// Python waits (BLPOP on the signal list) while Go computes; Go's
	// release wakes it.
	started, finish := make(chan struct{}), make(chan struct{})
	go func() {
		_, _, err := cc.GetOrCompute(ctx, "report2", time.Minute, func(context.Context) ([]byte, error) {
			close(started)
			<-finish
			return []byte("go"), nil
		})
		got <- err
	}()
	<-started
	py2 := redistest.PyLock{C: admin, Name: cache.LockName("report2"), ID: "py-waiter", Expire: 60}
	woke := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		if py2.Acquire(ctx, true, 10) { // BLPOP for 10 s at most
			woke <- time.Since(t0)
		} else {
			woke <- time.Hour
		}
	}()
	redistest.WaitBlocked(t, admin, 1)
	close(finish)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := <-woke; d > 5*time.Second {
		t.Fatalf("the Python waiter took the lock %v after GetOrCompute's release, want at once", d)
	}
}

// Bad input gets a clear error and sends nothing.
func TestCacheBadInput(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for _, opts := range [][]cache.Option{
		{cache.WithNegativeTTL(-1)},
		{cache.WithStaleAfter(-time.Second)},
		{cache.WithTTLJitter(1.5)},
		{cache.WithTTLJitter(-0.1)},
		{cache.WithRefreshTimeout(0)},
		{cache.WithLockOptions(redislock.WithExpire(-1))},
	} {
		if _, err := cache.New(c, opts...); !errors.Is(err, redislock.ErrInvalidArgument) {
			t.Errorf("New(%d options) = %v, want ErrInvalidArgument", len(opts), err)
		}
	}
	// The bounds of the documented ranges are allowed.
	for _, j := range []float64{0, 1} {
		if _, err := cache.New(c, cache.WithTTLJitter(j)); err != nil {
			t.Errorf("New(WithTTLJitter(%v)) = %v, want it accepted ([0, 1])", j, err)
		}
	}
	if _, err := cache.New(nil); !errors.Is(err, redislock.ErrNilClient) {
		t.Errorf("New(nil) = %v, want ErrNilClient", err)
	}
	var typedNil *redis.Client
	if _, err := cache.New(typedNil); !errors.Is(err, redislock.ErrNilClient) {
		t.Errorf("New((*redis.Client)(nil)) = %v, want ErrNilClient", err)
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cluster.Close()
	if _, err := cache.New(cluster); !errors.Is(err, redislock.ErrUnsupportedClient) {
		t.Errorf("New(cluster) = %v, want ErrUnsupportedClient", err)
	}
	cc := mustCache(t, c)
	fn := func(context.Context) ([]byte, error) { return nil, nil }
	ctx := context.Background()
	for _, call := range []struct {
		key string
		ttl time.Duration
		fn  func(context.Context) ([]byte, error)
	}{{"", time.Minute, fn}, {"k", 0, fn}, {"k", time.Microsecond, fn}, {"k", time.Minute, nil}} {
		if _, _, err := cc.GetOrCompute(ctx, call.key, call.ttl, call.fn); !errors.Is(err, redislock.ErrInvalidArgument) {
			t.Errorf("GetOrCompute(%q, %v, nil fn %v) = %v, want ErrInvalidArgument", call.key, call.ttl, call.fn == nil, err)
		}
	}
}

// A computing process SIGSTOPped past its lock's expire: another caller
// computes and stores meanwhile; when the stopped one resumes, its late
// value is not stored, and it reports the loss.
func TestCacheStoppedComputerStoresNothing(t *testing.T) {
	t.Parallel()
	b := realBackend(t)
	ctx := ctxT(t)
	admin := b.client()
	cmd := worker(t, "cachestop", "W_ADDR="+admin.Options().Addr, "W_NAME=doc")
	r := redistest.StartProcess(t, cmd)
	if line, _ := r.ReadString('\n'); line != "computing\n" {
		t.Fatalf("worker printed %q", line)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Its lock (500 ms, renewed by the stopped process) expires.
	lockKey := lockKey("doc")
	deadline := time.Now().Add(5 * time.Second)
	for admin.Exists(ctx, lockKey).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the stopped computer's lock did not expire")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cc := mustCache(t, b.client())
	v, res, err := cc.GetOrCompute(ctx, "doc", time.Minute, func(context.Context) ([]byte, error) { return []byte("newer"), nil })
	if err != nil || res != cache.Computed || string(v) != "newer" {
		t.Fatalf("the other caller = %q, %v, %v", v, res, err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	line, _ := r.ReadString('\n')
	if line != `"" Result(0) lost=true`+"\n" {
		t.Fatalf("the resumed computer printed %q, want no value and a loss", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	v, res, err = cc.GetOrCompute(ctx, "doc", time.Minute, func(context.Context) ([]byte, error) { return []byte("again"), nil })
	if err != nil || res != cache.Hit || string(v) != "newer" {
		t.Fatalf("after = %q, %v, %v; want the newer value, a hit", v, res, err)
	}
}

// Jitter spreads the TTL in [ttl, ttl*(1+f)); a caller whose context ends
// while it waits for the lock gets ErrLocked and the context's error;
// after Close, calls are refused.
func TestCacheJitterWaitAndClose(t *testing.T) {
	onBoth(t, func(t *testing.T, b *backend) {
		ctx := ctxT(t)
		cc, err := cache.New(b.client(), cache.WithTTLJitter(0.5))
		if err != nil {
			t.Fatal(err)
		}
		value := func(context.Context) ([]byte, error) { return []byte("v"), nil }
		// Both halves of [10 s, 15 s) get some of 40 TTLs: all on one side
		// by chance is 2 × 2^-40. (A split at 11 s, one fifth of the
		// range, failed by chance about once in 90 runs: 0.8^20.)
		spread := map[bool]bool{}
		for i := range 40 {
			key := "j" + strconv.Itoa(i)
			if _, _, err := cc.GetOrCompute(ctx, key, 10*time.Second, value); err != nil {
				t.Fatal(err)
			}
			ttl := b.client().PTTL(ctx, key).Val()
			if ttl <= 0 || ttl > 15*time.Second {
				t.Fatalf("TTL with jitter 0.5 = %v, want within (0, 15s]", ttl)
			}
			spread[ttl > 12500*time.Millisecond] = true
		}
		if !spread[true] || !spread[false] {
			t.Fatalf("40 TTLs with jitter 0.5 all on one side of 12.5 s: %v", spread)
		}

		holder, err := redislock.New(b.client(), cache.LockName("busy"), redislock.WithExpire(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, _, err = cc.GetOrCompute(short, "busy", time.Minute, value)
		cancel()
		if !errors.Is(err, redislock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("GetOrCompute while the lock is held, 50 ms = %v; want ErrLocked and DeadlineExceeded", err)
		}

		if err := cc.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := cc.GetOrCompute(ctx, "k", time.Minute, value); !errors.Is(err, cache.ErrClosed) {
			t.Fatalf("GetOrCompute after Close = %v, want ErrCacheClosed", err)
		}
	})
}

// The cache's corners: a compute that fails with its own timeout is shared,
// not repeated by each waiting goroutine; a panicking refresh does not
// crash the process; stale reads in a process that lost the refresh do
// not each try the lock; a value written by another program is neither
// returned nor overwritten; jitter on a huge TTL does not overflow; a
// nil value comes back empty alike; a TTL within the soft TTL is refused.
func TestCacheCorners(t *testing.T) {
	b := realBackend(t)
	ctx := ctxT(t)

	t.Run("own timeout", func(t *testing.T) {
		cc := mustCache(t, b.client())
		var computes atomic.Int32
		fn := func(ctx context.Context) ([]byte, error) {
			computes.Add(1)
			tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			<-tctx.Done()
			return nil, fmt.Errorf("query: %w", tctx.Err())
		}
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := cc.GetOrCompute(ctx, "slow", time.Minute, fn); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("GetOrCompute = %v, want the compute's timeout", err)
				}
			}()
		}
		wg.Wait()
		if n := computes.Load(); n > 2 {
			t.Fatalf("%d computes for 20 callers failing with their compute's own timeout, want 1 (2 if one came after)", n)
		}
	})

	t.Run("panicking refresh", func(t *testing.T) {
		cc := mustCache(t, b.client(), cache.WithStaleAfter(50*time.Millisecond))
		first := true
		fn := func(context.Context) ([]byte, error) {
			if first {
				first = false
				return []byte("v"), nil
			}
			panic("boom")
		}
		if _, _, err := cc.GetOrCompute(ctx, "p", time.Minute, fn); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond)
		if _, res, err := cc.GetOrCompute(ctx, "p", time.Minute, fn); err != nil || res != cache.Stale {
			t.Fatalf("= %v, %v; want stale", res, err)
		}
		if err := cc.Close(ctx); err != nil { // the refresh has panicked, or will: the process goes on
			t.Fatal(err)
		}
	})

	t.Run("stale reads elsewhere", func(t *testing.T) {
		a := mustCache(t, b.client(), cache.WithStaleAfter(100*time.Millisecond))
		c := b.client()
		var tries atomic.Int32
		c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if n := strings.ToLower(cmd.Name()); (n == "evalsha" || n == "eval") && slices.Contains(cmd.Args(), any(lockKey("s"))) {
				tries.Add(1)
			}
			return next(ctx, cmd)
		}))
		other := mustCache(t, c, cache.WithStaleAfter(100*time.Millisecond))
		release := make(chan struct{})
		n := 0
		fn := func(context.Context) ([]byte, error) {
			n++
			if n > 1 {
				<-release
			}
			return []byte("v"), nil
		}
		defer close(release)
		if _, _, err := a.GetOrCompute(ctx, "s", time.Minute, fn); err != nil {
			t.Fatal(err)
		}
		time.Sleep(110 * time.Millisecond)
		if _, res, _ := a.GetOrCompute(ctx, "s", time.Minute, fn); res != cache.Stale {
			t.Fatalf("= %v, want stale (a's refresh starts)", res)
		}
		for deadline := time.Now().Add(10 * time.Second); b.client().Exists(ctx, lockKey("s")).Val() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a's refresh did not take the lock in 10 s")
			}
		}
		start := time.Now()
		for range 300 {
			if _, res, err := other.GetOrCompute(ctx, "s", time.Minute, fn); err != nil || res != cache.Stale {
				t.Fatalf("= %v, %v; want stale", res, err)
			}
		}
		// One try per pause (50 ms here), not one per read.
		if max := int32(time.Since(start)/(50*time.Millisecond)) + 2; tries.Load() > max {
			t.Fatalf("300 stale reads in %v sent %d lock tries, want at most %d", time.Since(start), tries.Load(), max)
		}
	})

	t.Run("foreign value", func(t *testing.T) {
		for _, stale := range []bool{false, true} {
			var opts []cache.Option
			if stale {
				opts = append(opts, cache.WithStaleAfter(time.Millisecond))
			}
			cc := mustCache(t, b.client(), opts...)
			b.client().Set(ctx, "f", "value-written-by-python", time.Minute)
			_, _, err := cc.GetOrCompute(ctx, "f", time.Minute, func(context.Context) ([]byte, error) { return []byte("mine"), nil })
			if !errors.Is(err, cache.ErrForeignValue) {
				t.Fatalf("stale %v: GetOrCompute over a foreign value = %v, want ErrForeignValue", stale, err)
			}
			if v := b.client().Get(ctx, "f").Val(); v != "value-written-by-python" {
				t.Fatalf("stale %v: the foreign value became %q", stale, v)
			}
		}
	})

	t.Run("huge ttl with jitter", func(t *testing.T) {
		cc := mustCache(t, b.client(), cache.WithTTLJitter(0.9))
		for i := range 5 {
			key := "huge" + strconv.Itoa(i)
			if _, _, err := cc.GetOrCompute(ctx, key, 200*365*24*time.Hour, func(context.Context) ([]byte, error) { return []byte("v"), nil }); err != nil {
				t.Fatal(err)
			}
			if ttl := b.client().PTTL(ctx, key).Val(); ttl < 100*365*24*time.Hour {
				t.Fatalf("PTTL = %v after a 200-year TTL with jitter", ttl)
			}
		}
	})

	t.Run("nil value", func(t *testing.T) {
		cc := mustCache(t, b.client())
		for i := range 2 {
			v, _, err := cc.GetOrCompute(ctx, "nil", time.Minute, func(context.Context) ([]byte, error) { return nil, nil })
			if err != nil || v == nil || len(v) != 0 {
				t.Fatalf("call %d = %#v, %v; want an empty, non-nil value", i, v, err)
			}
		}
	})

	t.Run("ttl within the soft ttl", func(t *testing.T) {
		cc := mustCache(t, b.client(), cache.WithStaleAfter(time.Minute))
		if _, _, err := cc.GetOrCompute(ctx, "k", time.Minute, func(context.Context) ([]byte, error) { return nil, nil }); !errors.Is(err, redislock.ErrInvalidArgument) {
			t.Fatalf("TTL = soft TTL: %v, want ErrInvalidCacheCall", err)
		}
	})
}

// The store writes only where the value key is missing or holds a value of
// this package: a value another program writes while fn runs (Django's
// pickle, say) stays, and the caller is told.
func TestCacheStoreSparesAValueWrittenMeanwhile(t *testing.T) {
	onBoth(t, func(t *testing.T, b *backend) {
		ctx := ctxT(t)
		admin := b.client()
		cc := mustCache(t, b.client())
		const foreign = "\x80\x05\x95pickled-by-django"
		v, res, err := cc.GetOrCompute(ctx, "report", time.Minute, func(context.Context) ([]byte, error) {
			admin.Set(ctx, "report", foreign, time.Minute) // another program fills the key meanwhile
			return []byte("go's value"), nil
		})
		if !errors.Is(err, cache.ErrForeignValue) || v != nil {
			t.Fatalf("GetOrCompute over a value written meanwhile = %q, %v, %v; want ErrForeignValue", v, res, err)
		}
		if got := admin.Get(ctx, "report").Val(); got != foreign {
			t.Fatalf("the other program's value became %q", got)
		}
		if n := admin.Exists(ctx, lockKey("report")).Val(); n != 0 {
			t.Fatal("the lock was left held")
		}
		// Bytes that merely start with our header are not ours either.
		const lookalike = "\xffRLC1 written by someone else"
		v, res, err = cc.GetOrCompute(ctx, "lookalike", time.Minute, func(context.Context) ([]byte, error) {
			admin.Set(ctx, "lookalike", lookalike, time.Minute)
			return []byte("go's value"), nil
		})
		if !errors.Is(err, cache.ErrForeignValue) {
			t.Fatalf("GetOrCompute over look-alike bytes written meanwhile = %q, %v, %v; want ErrForeignValue", v, res, err)
		}
		if got := admin.Get(ctx, "lookalike").Val(); got != lookalike {
			t.Fatalf("the look-alike value became %q", got)
		}
		// A value of our own format is replaced (a stale one, refreshed).
		refresh := mustCache(t, b.client(), cache.WithStaleAfter(time.Millisecond))
		if _, _, err := refresh.GetOrCompute(ctx, "own", time.Minute, func(context.Context) ([]byte, error) { return []byte("v1"), nil }); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			v, res, err := refresh.GetOrCompute(ctx, "own", time.Minute, func(context.Context) ([]byte, error) { return []byte("v2"), nil })
			if err != nil {
				t.Fatal(err)
			}
			if string(v) == "v2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("5 s on: %q, %v; the refresh never replaced our own stale value", v, res)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// A first caller whose context ends just after fn returned still stores
// the value: the callers waiting for it, in this process and in another,
// get it without computing again.
func TestCacheValueOutlivesTheComputersContext(t *testing.T) {
	onBoth(t, func(t *testing.T, b *backend) {
		ctx := ctxT(t)
		here, there := mustCache(t, b.client()), mustCache(t, b.client()) // two processes
		var computes atomic.Int32
		started, finish := make(chan struct{}), make(chan struct{})
		leaderCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		type answer struct {
			v   []byte
			res cache.Result
			err error
		}
		leader := make(chan answer, 1)
		go func() {
			v, res, err := here.GetOrCompute(leaderCtx, "k", time.Minute, func(context.Context) ([]byte, error) {
				computes.Add(1)
				close(started)
				<-finish
				cancel() // the caller gives up just as the value is ready
				return []byte("value"), nil
			})
			leader <- answer{v, res, err}
		}()
		<-started
		fn := func(context.Context) ([]byte, error) { computes.Add(1); return []byte("again"), nil }
		followers := make(chan answer, 2)
		for _, cc := range []*cache.Cache{here, there} {
			go func() {
				v, res, err := cc.GetOrCompute(ctx, "k", time.Minute, fn)
				followers <- answer{v, res, err}
			}()
		}
		// there's caller waits on the lock in Redis; here's shares the
		// leader's call (it joins at once, or finds the value).
		if b.mini == nil {
			redistest.WaitBlocked(t, b.client(), 1)
		}
		close(finish)
		if a := <-leader; a.err != nil || string(a.v) != "value" || a.res != cache.Computed {
			t.Fatalf("the computer whose context ended = %q, %v, %v; want the value, computed", a.v, a.res, a.err)
		}
		for range 2 {
			if a := <-followers; a.err != nil || string(a.v) != "value" {
				t.Fatalf("a waiting caller = %q, %v, %v; want the stored value", a.v, a.res, a.err)
			}
		}
		if n := computes.Load(); n != 1 {
			t.Fatalf("%d computes, want 1: the value was thrown away", n)
		}
		if got, _ := b.client().Get(ctx, "k").Bytes(); !strings.HasSuffix(string(got), "value") {
			t.Fatalf("the key holds %q, want the computed value", got)
		}
	})
}
