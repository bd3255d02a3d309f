package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gocache "github.com/go-redis/cache/v9"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/go-redis-lock/redislock/cache"
)

// The cache-stampede workload: cacheCallers concurrent misses of one cold
// key, spread over cacheClients clients (each a process of its own in
// production: its own go-redis client and its own in-process
// deduplication), with a compute that takes cacheCompute. Counted: the
// computes, the Redis commands sent (INFO commandstats) and the time until
// the last caller has the value.
const (
	cacheClients = 8
	cacheCallers = 1000
	cacheCompute = 100 * time.Millisecond
	cacheTTL     = time.Minute
)

// cacheFiller is one way of filling a missing key.
type cacheFiller struct {
	name string
	// setup returns, for one client, the get-or-compute call of that
	// client, and a cleanup.
	setup func(c *redis.Client) (get func(ctx context.Context, key string, compute func() []byte) ([]byte, error), done func())
}

var cacheFillers = []cacheFiller{
	{"go-redis-lock cache.GetOrCompute", func(c *redis.Client) (func(context.Context, string, func() []byte) ([]byte, error), func()) {
		cc, err := cache.New(c)
		if err != nil {
			panic(err)
		}
		return func(ctx context.Context, key string, compute func() []byte) ([]byte, error) {
			v, _, err := cc.GetOrCompute(ctx, key, cacheTTL, func(context.Context) ([]byte, error) { return compute(), nil })
			return v, err
		}, func() { cc.Close(context.Background()) }
	}},
	{"x/sync singleflight + GET/SET", func(c *redis.Client) (func(context.Context, string, func() []byte) ([]byte, error), func()) {
		var g singleflight.Group
		return func(ctx context.Context, key string, compute func() []byte) ([]byte, error) {
			v, err, _ := g.Do(key, func() (any, error) {
				b, err := c.Get(ctx, key).Bytes()
				if err == nil {
					return b, nil
				}
				if err != redis.Nil {
					return nil, err
				}
				b = compute()
				return b, c.Set(ctx, key, b, cacheTTL).Err()
			})
			b, _ := v.([]byte)
			return b, err
		}, func() {}
	}},
	{"go-redis/cache Once", func(c *redis.Client) (func(context.Context, string, func() []byte) ([]byte, error), func()) {
		cc := gocache.New(&gocache.Options{Redis: c})
		return func(ctx context.Context, key string, compute func() []byte) ([]byte, error) {
			var b []byte
			err := cc.Once(&gocache.Item{Ctx: ctx, Key: key, Value: &b, TTL: cacheTTL,
				Do: func(*gocache.Item) (any, error) { return compute(), nil }})
			return b, err
		}, func() {}
	}},
}

// cacheRun is one run of the workload for one filler.
type cacheRun struct {
	computes int64
	sent     int64 // commands the callers' clients sent (a pipeline's each)
	commands int64
	elapsed  time.Duration
	wrong    int // callers that got no value, or another value
}

type cacheResult struct {
	name string
	runs []cacheRun
}

func runCache(ctx context.Context, addr string, cfg config) ([]*cacheResult, error) {
	var out []*cacheResult
	for _, f := range cacheFillers {
		res := &cacheResult{name: f.name}
		for i := 0; i < cfg.repeats; i++ {
			r, err := cacheOnce(ctx, addr, f, fmt.Sprintf("cache:%d:%d", len(out), i))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.name, err)
			}
			res.runs = append(res.runs, r)
		}
		log.Printf("%-34s %d misses: computes %.0f, sent %.0f, server commands %.0f, all served in %v, wrong %d",
			f.name, cacheCallers, medianF(res.runs, func(r cacheRun) float64 { return float64(r.computes) }),
			medianF(res.runs, func(r cacheRun) float64 { return float64(r.sent) }),
			medianF(res.runs, func(r cacheRun) float64 { return float64(r.commands) }),
			medianD(res.runs, func(r cacheRun) time.Duration { return r.elapsed }).Round(time.Millisecond),
			maxWrong(res.runs))
		out = append(out, res)
	}
	return out, nil
}

func cacheOnce(ctx context.Context, addr string, f cacheFiller, key string) (cacheRun, error) {
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	var computes, sent atomic.Int64
	compute := func() []byte {
		computes.Add(1)
		time.Sleep(cacheCompute)
		return []byte("the value of " + key)
	}
	gets := make([]func(context.Context, string, func() []byte) ([]byte, error), cacheClients)
	for i := range gets {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: cacheCallers/cacheClients + 10, ContextTimeoutEnabled: true})
		c.AddHook(counting{&sent})
		defer c.Close()
		get, done := f.setup(c)
		defer done()
		gets[i] = get
	}
	before, err := commandCount(ctx, admin)
	if err != nil {
		return cacheRun{}, err
	}
	var wrong atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cacheCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := gets[i%cacheClients](ctx, key, compute)
			if err != nil || string(v) != "the value of "+key {
				wrong.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, err := commandCount(ctx, admin)
	if err != nil {
		return cacheRun{}, err
	}
	return cacheRun{computes: computes.Load(), sent: sent.Load(), commands: after - before - 1, elapsed: elapsed, wrong: int(wrong.Load())}, nil
}

// commandCount is the server's total of commands run (INFO commandstats),
// itself included.
func commandCount(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, line := range strings.Split(info, "\r\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, rest, _ := strings.Cut(line, ":calls=")
		n, _, _ := strings.Cut(rest, ",")
		var v int64
		fmt.Sscan(n, &v)
		total += v
	}
	return total, nil
}

func maxWrong(rs []cacheRun) int {
	m := 0
	for _, r := range rs {
		m = max(m, r.wrong)
	}
	return m
}

// cacheSection reports the cache-stampede workload.
func (r *report) cacheSection(b *strings.Builder) {
	if len(r.cache) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## 7. Cache stampede: %d concurrent misses of one key from %d clients\n\n", cacheCallers, cacheClients)
	fmt.Fprintf(b, "%d goroutines ask at once for one cold key, spread over %d go-redis clients (%d each: each client stands for a process, with its own "+
		"in-process deduplication); the compute takes %v. Computes: how often it ran; sent: the commands the callers' clients sent (each of a pipeline; "+
		"go-redis-lock's key watch uses connections of its own, not counted here); server commands: all commands Redis ran meanwhile (INFO commandstats: "+
		"the commands inside Lua scripts and the handshakes of new connections included); "+
		"served: until the last caller had the value; wrong: callers that got an error or another value (the worst repeat). Medians of %d repeat(s).\n\n",
		cacheCallers, cacheClients, cacheCallers/cacheClients, cacheCompute, r.cfg.repeats)
	fmt.Fprintf(b, "| filler | computes | sent | server commands | served in | wrong |\n|---|---:|---:|---:|---:|---:|\n")
	for _, c := range r.cache {
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.0f | %v | %d |\n", c.name,
			medianF(c.runs, func(x cacheRun) float64 { return float64(x.computes) }),
			medianF(c.runs, func(x cacheRun) float64 { return float64(x.sent) }),
			medianF(c.runs, func(x cacheRun) float64 { return float64(x.commands) }),
			medianD(c.runs, func(x cacheRun) time.Duration { return x.elapsed }).Round(time.Millisecond),
			maxWrong(c.runs))
	}
}
