package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

const demoUsage = `Usage: redislock demo [flags]

Starts --workers workers, each with its own Redis connection as a separate
process would have, that take the lock --name --rounds times each and, while
holding it, increment a shared counter in Redis non-atomically (GET, wait
--hold, SET). At the end it prints what each worker got, whether the counter
lost any update, and how many Redis commands the lock used per acquisition.

Without --redis it runs on an in-process Redis (miniredis) whose clock
follows real time, so nothing needs to be installed.

Examples:
  redislock demo
  redislock demo --workers 16 --rounds 100
  redislock demo --redis redis://127.0.0.1:6379/0

Flags:
`

// demoConfig holds the demo's flags.
type demoConfig struct {
	redisURL string
	name     string
	workers  int
	rounds   int
	hold     time.Duration
	expire   time.Duration
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg demoConfig
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, demoUsage); fs.PrintDefaults() }
	fs.StringVar(&cfg.redisURL, "redis", "", "Redis URL (redis://, rediss://, unix://) or host:port; empty: an in-process Redis")
	fs.StringVar(&cfg.name, "name", "redislock-demo", "lock name (key lock:NAME)")
	fs.IntVar(&cfg.workers, "workers", 8, "number of workers")
	fs.IntVar(&cfg.rounds, "rounds", 50, "acquisitions per worker")
	fs.DurationVar(&cfg.hold, "hold", time.Millisecond, "time spent holding the lock each round")
	fs.DurationVar(&cfg.expire, "expire", 10*time.Second, "the lock's expire")
	pos, after, _, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if extra := append(pos, after...); len(extra) > 0 {
		fmt.Fprintf(stderr, "redislock demo: unexpected argument %q\n", extra[0])
		return exitUsage
	}
	switch {
	case cfg.workers < 1 || cfg.workers > 1000:
		fmt.Fprintln(stderr, "redislock demo: --workers must be between 1 and 1000")
		return exitUsage
	case cfg.rounds < 1:
		fmt.Fprintln(stderr, "redislock demo: --rounds must be at least 1")
		return exitUsage
	case cfg.hold < 0:
		fmt.Fprintln(stderr, "redislock demo: --hold must not be negative")
		return exitUsage
	case cfg.expire <= cfg.hold:
		fmt.Fprintln(stderr, "redislock demo: --expire must be longer than --hold")
		return exitUsage
	}

	opts, where, cleanup, err := demoRedis(cfg.redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "redislock demo: %v\n", err)
		return exitUsage
	}
	defer cleanup()
	if err := ping(ctx, opts); err != nil {
		fmt.Fprintf(stderr, "redislock demo: cannot reach Redis at %s: %v\n", where, err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%d workers x %d rounds on lock %q, Redis %s\n", cfg.workers, cfg.rounds, cfg.name, where)

	res, err := demo(ctx, cfg, opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "redislock demo: %v\n", err)
		return exitFail
	}
	res.print(stdout, cfg)
	if res.counter != cfg.workers*cfg.rounds {
		return exitFail
	}
	return exitOK
}

// demoRedis returns client options for url, or starts an in-process Redis
// whose clock follows real time when url is empty.
func demoRedis(url string) (opts *redis.Options, where string, cleanup func(), err error) {
	if url != "" {
		opts, err := parseRedisURL(url)
		if err != nil {
			return nil, "", nil, badURL(url)
		}
		return opts, opts.Addr, func() {}, nil
	}
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, "", nil, fmt.Errorf("start in-process Redis: %w", err)
	}
	// miniredis expires keys only when told time has passed.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	cleanup = func() {
		close(stop)
		<-done
		m.Close()
	}
	return &redis.Options{Addr: m.Addr()}, "in-process (miniredis " + m.Addr() + ")", cleanup, nil
}

func ping(ctx context.Context, opts *redis.Options) error {
	o := *opts
	o.MaxRetries = -1
	c := redis.NewClient(&o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// demoResult is what the demo measured.
type demoResult struct {
	perWorker []workerResult
	counter   int
	commands  map[string]int64 // lock commands by name, over all workers
	elapsed   time.Duration
}

type workerResult struct {
	acquired int
	waits    []time.Duration
}

// cmdCounter is a client hook counting the commands sent, by name.
type cmdCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (h *cmdCounter) add(cmds ...redis.Cmder) {
	h.mu.Lock()
	for _, c := range cmds {
		switch name := strings.ToUpper(c.Name()); name {
		case "HELLO", "CLIENT", "AUTH", "SELECT", "PING":
			// go-redis's connection setup, not the lock's traffic
		default:
			h.n[name]++
		}
	}
	h.mu.Unlock()
}
func (h *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.add(cmd); return next(ctx, cmd) }
}
func (h *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.add(cmds...); return next(ctx, cmds) }
}

// demo runs the workers and gathers their results.
func demo(ctx context.Context, cfg demoConfig, opts *redis.Options, progress io.Writer) (*demoResult, error) {
	counterKey := "redislock-demo:counter:" + cfg.name
	admin := redis.NewClient(opts)
	defer admin.Close()
	if err := admin.Del(ctx, counterKey).Err(); err != nil {
		return nil, err
	}
	defer admin.Del(context.WithoutCancel(ctx), counterKey)

	hook := &cmdCounter{n: map[string]int64{}}
	res := &demoResult{perWorker: make([]workerResult, cfg.workers)}
	var (
		total    atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }

	start := time.Now()
	for w := range cfg.workers {
		// Each worker has its own connections, as a separate process would:
		// one for the lock (counted) and one for the counter.
		lockClient, dataClient := redis.NewClient(opts), redis.NewClient(opts)
		lockClient.AddHook(hook)
		lock, err := redislock.New(lockClient, cfg.name, redislock.WithExpire(cfg.expire))
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer lockClient.Close()
			defer dataClient.Close()
			r := &res.perWorker[w]
			for range cfg.rounds {
				t0 := time.Now()
				if err := lock.Acquire(ctx); err != nil {
					fail(fmt.Errorf("worker %d: %w", w+1, err))
					return
				}
				r.waits = append(r.waits, time.Since(t0))
				err := increment(ctx, dataClient, counterKey, cfg.hold)
				if rerr := lock.Release(context.WithoutCancel(ctx)); err == nil {
					err = rerr
				}
				if err != nil {
					fail(fmt.Errorf("worker %d: %w", w+1, err))
					return
				}
				r.acquired++
				total.Add(1)
			}
		}()
	}
	stopProgress := showProgress(progress, &total, int64(cfg.workers*cfg.rounds))
	wg.Wait()
	stopProgress()
	res.elapsed = time.Since(start)
	if firstErr != nil {
		return nil, firstErr
	}
	n, err := admin.Get(ctx, counterKey).Int()
	if err != nil {
		return nil, fmt.Errorf("read counter: %w", err)
	}
	res.counter = n
	res.commands = hook.n
	return res, nil
}

// increment adds one to the counter the unsafe way: read, wait, write.
// Only the lock keeps two workers from overwriting each other's update.
func increment(ctx context.Context, c *redis.Client, key string, hold time.Duration) error {
	n, err := c.Get(ctx, key).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if hold > 0 {
		time.Sleep(hold)
	}
	return c.Set(ctx, key, n+1, 0).Err()
}

// showProgress prints done/total to w while the workers run: in place on a
// terminal, a line a second otherwise. The returned func stops it.
func showProgress(w io.Writer, done *atomic.Int64, total int64) func() {
	f, ok := w.(*os.File)
	tty := ok && isTerminal(f)
	every := time.Second
	if tty {
		every = 100 * time.Millisecond
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				if tty {
					fmt.Fprintf(w, "\racquisitions: %d/%d\n", done.Load(), total)
				}
				return
			case <-t.C:
				if tty {
					fmt.Fprintf(w, "\racquisitions: %d/%d", done.Load(), total)
				} else {
					fmt.Fprintf(w, "acquisitions: %d/%d\n", done.Load(), total)
				}
			}
		}
	}()
	return func() { close(stop); <-stopped }
}

func (r *demoResult) print(w io.Writer, cfg demoConfig) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\tacquisitions\twait p50\twait max\t")
	acquired := 0
	for i, wr := range r.perWorker {
		acquired += wr.acquired
		p50, mx := durationStats(wr.waits)
		fmt.Fprintf(tw, "%d\t%d\t%v\t%v\t\n", i+1, wr.acquired, p50, mx)
	}
	tw.Flush()

	want := cfg.workers * cfg.rounds
	verdict := "no lost updates"
	if r.counter != want {
		verdict = fmt.Sprintf("LOST %d UPDATES", want-r.counter)
	}
	fmt.Fprintf(w, "\ncounter: %d, expected %d: %s\n", r.counter, want, verdict)

	var sum int64
	names := make([]string, 0, len(r.commands))
	for name, n := range r.commands {
		sum += n
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return r.commands[names[i]] > r.commands[names[j]] })
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %d", name, r.commands[name])
	}
	perAcq := 0.0
	if acquired > 0 {
		perAcq = float64(sum) / float64(acquired)
	}
	fmt.Fprintf(w, "lock commands: %d (%s), %.2f per acquisition\n", sum, strings.Join(parts, ", "), perAcq)
	fmt.Fprintf(w, "elapsed: %v, %.0f acquisitions/s\n", r.elapsed.Round(time.Millisecond), float64(acquired)/r.elapsed.Seconds())
}

// durationStats returns the median and maximum of ds, rounded for display.
func durationStats(ds []time.Duration) (p50, mx time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	round := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return round(s[len(s)/2]), round(s[len(s)-1])
}
