package cache_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/cache"
	"github.com/go-redis-lock/redislock/internal/leakcheck"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/redislocktest"
)

// TestMain fails the package if any goroutine outlives the tests. With
// workerEnv set, the test binary is instead a worker process of the
// multi-process tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv(workerEnv); mode != "" {
		os.Exit(runWorker(mode))
	}
	redis.SetLogger(quiet{}) // set once, before any client runs
	os.Exit(leakcheck.Run(m))
}

// quiet is go-redis's logger in these tests: a refused dial or a closed
// pool is what the tests do on purpose.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// backend is a Redis for a test: a real redis-server or an in-process
// miniredis. client returns a new client of it, closed at test end.
type backend struct {
	client func() *redis.Client
	mini   *miniredis.Miniredis // nil for a real server
}

// realBackend starts a redis-server for t.
func realBackend(t *testing.T) *backend {
	t.Helper()
	s := redistest.Start(t)
	return &backend{client: func() *redis.Client { return s.Client() }}
}

// onBoth runs fn as a subtest on a real redis-server and on miniredis.
func onBoth(t *testing.T, fn func(t *testing.T, b *backend)) {
	t.Helper()
	t.Run("redis-server", func(t *testing.T) { fn(t, realBackend(t)) })
	t.Run("miniredis", func(t *testing.T) {
		s := redislocktest.NewMini(t)
		fn(t, &backend{client: func() *redis.Client { return s.Client() }, mini: s.Miniredis()})
	})
}

// ctxT returns a context that ends with the test, or after 20 s.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCache(t testing.TB, c redis.UniversalClient, opts ...cache.Option) *cache.Cache {
	t.Helper()
	cc, err := cache.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close(context.Background()) })
	return cc
}

// lockKey is the key of the lock a miss of key takes.
func lockKey(key string) string { return "lock:" + cache.LockName(key) }

// Worker processes: the test binary re-executed with workerEnv set to a
// mode, and its parameters in environment variables.
const workerEnv = "REDISLOCK_CACHE_TEST_WORKER"

// worker starts the test binary as a worker process.
func worker(t *testing.T, mode string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{workerEnv + "=" + mode}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// runWorker is the worker's main; it returns the exit code.
func runWorker(mode string) int {
	addr, name := os.Getenv("W_ADDR"), os.Getenv("W_NAME")
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "worker:", err); return 1 }
	switch mode {
	case "cache": // W_GOROUTINES GetOrCompute of key W_NAME at once; the compute takes 200 ms
		n, _ := strconv.Atoi(os.Getenv("W_GOROUTINES"))
		var sent atomic.Int64 // round trips this process sends
		c.AddHook(roundTrips{&sent})
		cc, err := cache.New(c)
		if err != nil {
			return fail(err)
		}
		defer cc.Close(ctx)
		fmt.Println("ready")
		var wg sync.WaitGroup
		lines := make([]string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, res, err := cc.GetOrCompute(ctx, name, time.Minute, func(ctx context.Context) ([]byte, error) {
					if err := c.Incr(ctx, name+":computes").Err(); err != nil {
						return nil, err
					}
					time.Sleep(200 * time.Millisecond) // the compute
					return []byte("the value"), nil
				})
				lines[i] = fmt.Sprintf("%s %q %v", res, v, err)
			}()
		}
		wg.Wait()
		for _, l := range lines {
			fmt.Println(l)
		}
		fmt.Println("sent", sent.Load())
		return 0
	case "cachestop": // GetOrCompute of W_NAME with a 500 ms lock; the compute prints "computing", then takes 1.5 s
		cc, err := cache.New(c, cache.WithLockOptions(redislock.WithExpire(500*time.Millisecond)))
		if err != nil {
			return fail(err)
		}
		defer cc.Close(ctx)
		v, res, err := cc.GetOrCompute(ctx, name, time.Minute, func(ctx context.Context) ([]byte, error) {
			fmt.Println("computing")
			time.Sleep(1500 * time.Millisecond) // ignores ctx, as a careless compute would
			return []byte("stale"), nil
		})
		fmt.Printf("%q %v lost=%v\n", v, res, errors.Is(err, redislock.ErrLost))
		return 0
	}
	return fail(fmt.Errorf("unknown mode %q", mode))
}

// roundTrips counts the round trips a client sends: each command, and
// each pipeline once.
type roundTrips struct{ n *atomic.Int64 }

func (h roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// commandHook is redistest.CommandHook.
type commandHook = redistest.CommandHook

// exec0 is a started worker and its output.
type exec0 struct {
	cmd interface{ Wait() error }
	out *bufio.Reader
}

func (w *exec0) lines(t *testing.T) []string {
	t.Helper()
	var lines []string
	for {
		l, err := w.out.ReadString('\n')
		if l != "" {
			lines = append(lines, strings.TrimSuffix(l, "\n"))
		}
		if err != nil {
			break
		}
	}
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("worker: %v (printed %q)", err, lines)
	}
	return lines
}
