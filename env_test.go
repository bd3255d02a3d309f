package redislock_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/redislocktest"
)

// backend is a Redis for a test: a real redis-server or an in-process
// miniredis.
type backend struct {
	name string
	// client returns a new client of the backend, closed at test end.
	client func() *redis.Client
	// mini is the miniredis, nil for a real server.
	mini *miniredis.Miniredis
}

// realBackend starts a redis-server for t.
func realBackend(t *testing.T) *backend {
	t.Helper()
	s := redistest.Start(t)
	return &backend{name: "redis-server", client: func() *redis.Client { return s.Client() }}
}

// miniBackend starts a miniredis for t. Its TTLs run on the wall clock,
// as a real server's do: miniredis itself only moves them on FastForward,
// and a hold reads its key before its local deadline (a key whose TTL never
// runs out would keep it alive for ever).
func miniBackend(t *testing.T) *backend {
	t.Helper()
	// The test kit's in-process server runs them so (its own tests show it).
	s := redislocktest.NewMini(t)
	return &backend{name: "miniredis", mini: s.Miniredis(), client: func() *redis.Client {
		return s.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = false }) // go-redis defaults, as frozenMiniBackend's
	}}
}

// frozenMiniBackend starts a miniredis for t whose TTLs stand still unless
// the test moves them (FastForward).
func frozenMiniBackend(t *testing.T) *backend {
	t.Helper()
	m := miniredis.RunT(t)
	return &backend{name: "miniredis", mini: m, client: func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { c.Close() })
		return c
	}}
}

// onBoth runs fn as a subtest on a real redis-server and on miniredis,
// with the subtest's context (ctxT).
func onBoth(t *testing.T, fn func(t *testing.T, ctx context.Context, b *backend)) {
	t.Helper()
	t.Run("redis-server", func(t *testing.T) { fn(t, ctxT(t), realBackend(t)) })
	t.Run("miniredis", func(t *testing.T) { fn(t, ctxT(t), miniBackend(t)) })
}

// mustNew is redislock.New that fails the test on error.
//
// A client made by clientVia talks through a fault proxy, whose faults
// (a dropped reply, a blackhole) hit whichever connection comes first: a
// key tracker's connections would take, at random, faults meant for the
// lock's own commands. Locks on such a client do not track unless the
// test says WithTracking(true).
func mustNew(t testing.TB, c redis.UniversalClient, name string, opts ...redislock.Option) *redislock.Lock {
	t.Helper()
	if _, ok := proxied.Load(c); ok {
		opts = append([]redislock.Option{redislock.WithTracking(false)}, opts...)
	}
	l, err := redislock.New(c, name, opts...)
	if err != nil {
		t.Fatalf("New(%q) = %v", name, err)
	}
	// A hold the test left (the default Lock renews) ends with the test,
	// before its server stops: its renewal goroutine would otherwise
	// outlive the test until its local deadline. A weak pointer, so that
	// the tests of a Lock dropped while holding can see it collected.
	wl := weak.Make(l)
	t.Cleanup(func() {
		l := wl.Value()
		if l == nil {
			return
		}
		select {
		case <-l.Done():
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			l.Release(ctx)
		}
	})
	return l
}

// mustAcquire is l.Acquire(ctx) that fails the test on error.
func mustAcquire(t testing.TB, ctx context.Context, l *redislock.Lock) {
	t.Helper()
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire(%s) = %v", l.Name(), err)
	}
}

// keptHolding acquires l and keeps l from being collected until t ends: a
// Lock dropped while holding abandons its hold (its renewal and watch
// stop), so a hold that a test takes only to be there (another hold the
// watch keeps, say) would end at the next GC, and the test would pass
// without the state it sets up.
func keptHolding(t testing.TB, ctx context.Context, l *redislock.Lock) {
	t.Helper()
	mustAcquire(t, ctx, l)
	t.Cleanup(func() { runtime.KeepAlive(l) })
}

// long skips t under -short: a process, fault, cluster or replica
// scenario, which the full run has (go test -short is the quick loop).
func long(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
}

// quick is redistest.Quick.
var quick = redistest.Quick

// andBroken runs f as two subtests: name, the code as it is (broken
// false), and "broken/"+broken, a variant with the bug the test is there
// to catch (broken true), which must fail. A safety test keeps its broken
// variant to show that it can fail.
func andBroken(t *testing.T, name, broken string, f func(t *testing.T, broken bool)) {
	t.Helper()
	t.Run(name, func(t *testing.T) { f(t, false) })
	t.Run("broken/"+broken, func(t *testing.T) { f(t, true) })
}

// started starts a redis-server for t (see redistest.Start) and returns
// it, t's context (ctxT) and a client of the server's.
func started(t testing.TB) (*redistest.Server, context.Context, *redis.Client) {
	t.Helper()
	s := redistest.Start(t)
	return s, ctxT(t), s.Client()
}

// ctxT returns a context that ends with the test, or after 20 s.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// blockedClients is redistest.BlockedClients.
func blockedClients(t testing.TB, c *redis.Client) int {
	t.Helper()
	return redistest.BlockedClients(t, c)
}

// waitBlocked is redistest.WaitBlocked.
func waitBlocked(t testing.TB, c *redis.Client, n int) {
	t.Helper()
	redistest.WaitBlocked(t, c, n)
}

// commandStats returns INFO commandstats' calls per command of a real
// server ("evalsha" -> 12).
func commandStats(t testing.TB, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	stats := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				stats[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return stats
}

// delta returns after-before for each command that changed.
func delta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// commandHook is redistest.CommandHook.
type commandHook = redistest.CommandHook

// waiting returns a channel closed once a wait of client's has sent its
// BLPOP: the waiter is in line (a signal pushed before Redis blocks it is
// in the list for it). It works on miniredis, which counts no blocked
// clients, as on a real server.
func waiting(client redis.UniversalClient) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	redislock.AddWaitHook(client, pipelineHook(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		if len(cmds) > 0 && cmds[0].Name() == "blpop" {
			once.Do(func() { close(ch) })
		}
		return next(ctx, cmds)
	}))
	return ch
}

// blockedIn waits until a goroutine is parked (on a channel, a select, a
// mutex) with fn as its innermost frame outside the runtime, as a
// goroutine waiting for a *Lock's turn is in "(*core).runQueued"; it fails
// t after 10 s. fn is matched against the frame's function name, without
// the package path before the last "/".
func blockedIn(t testing.TB, fn string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		for _, g := range strings.Split(allStacks(), "\n\n") {
			if innermost(g) == fn {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine parked in %s after 10 s", fn)
		}
	}
}

// allStacks returns the stacks of every goroutine (runtime.Stack's dump).
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// innermost returns the innermost frame outside the runtime of the
// goroutine dump g (a header line, then a function line and a file line a
// frame), without its arguments and package path; "" for a running one.
func innermost(g string) string {
	lines := strings.Split(g, "\n")
	if len(lines) == 0 || strings.Contains(lines[0], "[running]") || strings.Contains(lines[0], "[runnable]") {
		return ""
	}
	for i := 1; i < len(lines); i += 2 {
		f := lines[i]
		if i := strings.LastIndex(f, "("); i > 0 && strings.HasSuffix(f, ")") {
			f = f[:i]
		}
		f = f[strings.LastIndex(f, "/")+1:]
		if !strings.HasPrefix(f, "runtime.") && !strings.HasPrefix(f, "sync.") && !strings.HasPrefix(f, "internal/") {
			return f
		}
	}
	return ""
}
