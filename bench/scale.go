package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/go-redis-lock/redislock"
)

// The scale workloads: many names, many workers, many held locks. Each
// library gets a multi-name locker on one client, shared by the goroutines
// given to it (a process's worth), as a service that locks per entity
// would use it.

// multiLocker locks any name; safe for concurrent use.
type multiLocker interface {
	// lock blocks until name is held or ctx ends, and returns its release.
	lock(ctx context.Context, name string) (release func(context.Context) error, err error)
	close()
}

// scaleContender is a library in the scale workloads.
type scaleContender struct {
	name string
	// poolSize is the client's connection pool size; blocking waiters
	// (BLPOP) need one connection each.
	// sent, when set, counts the commands the client sends.
	open func(addr string, poolSize int, sent *atomic.Int64) (multiLocker, error)
}

// scaleClient is a go-redis client for the scale workloads.
func scaleClient(addr string, pool int, sent *atomic.Int64) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: pool})
	if sent != nil {
		c.AddHook(counting{sent})
	}
	return c
}

var scaleContenders = []scaleContender{
	{"go-redis-lock", func(addr string, pool int, sent *atomic.Int64) (multiLocker, error) {
		return &ourMulti{c: scaleClient(addr, pool, sent)}, nil
	}},
	{"bsm/redislock 100ms linear", func(addr string, pool int, sent *atomic.Int64) (multiLocker, error) {
		c := scaleClient(addr, pool, sent)
		return bsmMulti{c: c, l: bsm.New(c), retry: bsm.LinearBackoff(100 * time.Millisecond)}, nil
	}},
	{"redsync defaults", func(addr string, pool int, sent *atomic.Int64) (multiLocker, error) {
		c := scaleClient(addr, pool, sent)
		return redsyncMulti{c: c, rs: redsync.New(redsyncgoredis.NewPool(c))}, nil
	}},
	{"rueidislock defaults", func(addr string, pool int, sent *atomic.Int64) (multiLocker, error) {
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
			ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
				c, err := rueidis.NewClient(o)
				if err != nil || sent == nil {
					return c, err
				}
				return rueidisCounting{c, sent}, nil
			},
		})
		if err != nil {
			return nil, err
		}
		return rueidisMulti{l}, nil
	}},
}

type ourMulti struct {
	c     *redis.Client
	mu    sync.Mutex
	locks map[string][]*redislock.Lock // idle Locks by name (a Lock is one holder)
}

func (m *ourMulti) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	m.mu.Lock()
	var l *redislock.Lock
	if free := m.locks[name]; len(free) > 0 {
		l, m.locks[name] = free[len(free)-1], free[:len(free)-1]
	}
	m.mu.Unlock()
	if l == nil {
		var err error
		if l, err = redislock.New(m.c, name, redislock.WithExpire(benchTTL)); err != nil {
			return nil, err
		}
	}
	if err := l.Acquire(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		err := l.Release(ctx)
		m.mu.Lock()
		if m.locks == nil {
			m.locks = map[string][]*redislock.Lock{}
		}
		m.locks[name] = append(m.locks[name], l)
		m.mu.Unlock()
		return err
	}, nil
}
func (m *ourMulti) close() { m.c.Close() }

type bsmMulti struct {
	c     *redis.Client
	l     *bsm.Client
	retry bsm.RetryStrategy
}

func (m bsmMulti) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	l, err := m.l.Obtain(ctx, name, benchTTL, &bsm.Options{RetryStrategy: m.retry})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}
func (m bsmMulti) close() { m.c.Close() }

type redsyncMulti struct {
	c  *redis.Client
	rs *redsync.Redsync
}

func (m redsyncMulti) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	mu := m.rs.NewMutex(name, redsync.WithExpiry(benchTTL))
	if err := (redsyncW{m: mu}).lock(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { _, err := mu.UnlockContext(ctx); return err }, nil
}
func (m redsyncMulti) close() { m.c.Close() }

type rueidisMulti struct{ l rueidislock.Locker }

func (m rueidisMulti) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	_, cancel, err := m.l.WithContext(ctx, name)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { cancel(); return nil }, nil
}
func (m rueidisMulti) close() { m.l.Close() }

// manyNames is the first scale workload's result.
type manyNames struct {
	perSec            float64 // lock operations (acquire+hold+release) per second
	p50, p99          time.Duration
	redisCPU, procCPU time.Duration // per operation
	commands          float64       // Redis commands per operation (scripts' included)
}

// runManyNames runs workers goroutines, spread over clients processes'
// clients, each taking a random one of names locks, holding it for hold,
// for d.
func runManyNames(ctx context.Context, addr string, c scaleContender, workers, clients, names int, hold, d time.Duration) (manyNames, error) {
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	prefix := uniqueName("many")
	lockers := make([]multiLocker, clients)
	for i := range lockers {
		m, err := c.open(addr, workers/clients+2, nil)
		if err != nil {
			return manyNames{}, err
		}
		defer m.close()
		lockers[i] = m
	}
	s0, err := sampleServer(ctx, admin)
	if err != nil {
		return manyNames{}, err
	}
	cpu0 := processCPU()
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu     sync.Mutex
		lat    []time.Duration
		wg     sync.WaitGroup
		failed firstError
	)
	start := time.Now()
	for i := range workers {
		m := lockers[i%clients]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for wctx.Err() == nil {
				name := prefix + ":" + strconv.Itoa(rand.IntN(names))
				t := time.Now()
				release, err := m.lock(wctx, name)
				if err != nil {
					if wctx.Err() == nil {
						failed.set(err)
					}
					break
				}
				time.Sleep(hold)
				if err := release(context.WithoutCancel(wctx)); err != nil {
					failed.set(err)
					break
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := failed.get(); err != nil {
		return manyNames{}, err
	}
	cpu1 := processCPU()
	s1, err := sampleServer(ctx, admin)
	if err != nil {
		return manyNames{}, err
	}
	n := float64(len(lat))
	all, _ := commandsSince(s0, s1)
	return manyNames{
		perSec: n / elapsed.Seconds(), p50: median(lat), p99: percentile(lat, 0.99),
		redisCPU: time.Duration(float64(s1.cpu-s0.cpu) / n), procCPU: time.Duration(float64(cpu1-cpu0) / n),
		commands: float64(all) / n,
	}, nil
}

// manyHeld is the second scale workload's result.
type manyHeld struct {
	held, waiters       int
	memPerHeld          float64 // bytes of Redis used_memory per held lock
	keyUsage            int64   // MEMORY USAGE of one held lock's key
	memPerWaiter        float64 // bytes of Redis used_memory per waiter
	procMemPerWaiter    float64 // bytes of this process's heap+stacks per waiting goroutine
	sentPerWaiterSecond float64 // commands the waiters' clients sent
	// serverCmdsPerWaiterSecond: commands Redis ran meanwhile, those
	// inside scripts included.
	serverCmdsPerWaiterSecond float64
	// handoffP50, handoffP99: from the release of a held lock to its
	// waiter holding it, the held locks released one after another.
	handoffP50, handoffP99 time.Duration
}

// runManyHeld holds held locks from one client, then starts waiters
// goroutines (on clients clients) on the first waiters of them, and
// measures memory on both sides and the waiters' commands over window.
func runManyHeld(ctx context.Context, addr string, c scaleContender, held, waiters, clients int, window time.Duration) (manyHeld, error) {
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	prefix := uniqueName("held")
	res := manyHeld{held: held, waiters: waiters}
	holder, err := c.open(addr, 16, nil)
	if err != nil {
		return res, err
	}
	defer holder.close()
	mem0, err := usedMemory(ctx, admin)
	if err != nil {
		return res, err
	}
	releases := make([]func(context.Context) error, held)
	defer func() {
		for _, r := range releases {
			if r != nil {
				r(context.WithoutCancel(ctx))
			}
		}
	}()
	for i := range releases {
		// Each is free: an acquire that takes 10 s is stuck.
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		releases[i], err = holder.lock(lctx, prefix+":"+strconv.Itoa(i))
		cancel()
		if err != nil {
			return res, fmt.Errorf("one client holding %d locks: the acquire of free lock number %d did not return within 10 s (%v)", held, i+1, err)
		}
	}
	time.Sleep(200 * time.Millisecond) // a watch's first reads
	mem1, err := usedMemory(ctx, admin)
	if err != nil {
		return res, err
	}
	res.memPerHeld = float64(mem1-mem0) / float64(held)
	key := keyOf(ctx, admin, prefix+":0")
	res.keyUsage, _ = admin.MemoryUsage(ctx, key).Result()

	var sent atomic.Int64
	lockers := make([]multiLocker, clients)
	for i := range lockers {
		m, err := c.open(addr, 0, &sent) // go-redis's default pool
		if err != nil {
			return res, err
		}
		defer m.close()
		lockers[i] = m
	}
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var failed firstError
	released := make([]atomic.Int64, waiters) // when the holder released waiter i's lock (UnixNano); 0: not yet
	got := make([]time.Duration, waiters)     // from that release to waiter i holding the lock
	for i := range waiters {
		m := lockers[i%clients]
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := m.lock(wctx, prefix+":"+strconv.Itoa(i))
			if err != nil {
				return
			}
			at := released[i].Load()
			if at == 0 {
				failed.set(fmt.Errorf("waiter %d got a held lock", i))
			} else {
				got[i] = time.Since(time.Unix(0, at))
			}
			release(context.WithoutCancel(wctx))
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(time.Second) // every waiter waiting
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	res.procMemPerWaiter = float64(int64(ms1.HeapInuse+ms1.StackInuse)-int64(ms0.HeapInuse+ms0.StackInuse)) / float64(waiters)
	mem2, err := usedMemory(ctx, admin)
	if err != nil {
		return res, err
	}
	res.memPerWaiter = float64(mem2-mem1) / float64(waiters)
	s0, err := sampleServer(ctx, admin)
	if err != nil {
		return res, err
	}
	sent0 := sent.Load()
	time.Sleep(window)
	sent1 := sent.Load()
	s1, err := sampleServer(ctx, admin)
	if err != nil {
		return res, err
	}
	all, _ := commandsSince(s0, s1)
	res.serverCmdsPerWaiterSecond = float64(all) / float64(waiters) / window.Seconds()
	res.sentPerWaiterSecond = float64(sent1-sent0) / float64(waiters) / window.Seconds()
	if err := failed.get(); err != nil {
		return res, err
	}
	// The hand-offs: the held locks with a waiter, released one by one.
	for i := range waiters {
		released[i].Store(time.Now().UnixNano())
		if err := releases[i](ctx); err != nil {
			return res, fmt.Errorf("release of held lock %d: %w", i, err)
		}
		releases[i] = nil
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return res, errors.New("waiters still waiting 30 s after their locks were released")
	}
	res.handoffP50, res.handoffP99 = percentile(got, 0.50), percentile(got, 0.99)
	return res, failed.get()
}

// keyOf finds the Redis key of a held lock name (each library has its own
// scheme): the first key that SCAN finds containing name.
func keyOf(ctx context.Context, admin *redis.Client, name string) string {
	keys, _, _ := admin.Scan(ctx, 0, "*"+name+"*", 100000).Result()
	for _, k := range keys {
		if strings.HasSuffix(k, name) || strings.Contains(k, name+":") || strings.HasSuffix(k, name+"}") {
			return k
		}
	}
	if len(keys) > 0 {
		return keys[0]
	}
	return name
}

func usedMemory(ctx context.Context, admin *redis.Client) (int64, error) {
	info, err := admin.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no used_memory in INFO memory")
}

// scaleRow is one library's scale results over the repeats.
type scaleRow struct {
	name  string
	many  []manyNames
	held  manyHeld
	error string // why the held workload did not run, if it did not
}

const (
	scaleWorkers = 64
	scaleClients = 8
	scaleNames   = 1000
	scaleHold    = time.Millisecond
)

func runScale(ctx context.Context, addr string, cfg config) ([]*scaleRow, error) {
	var rows []*scaleRow
	for _, c := range scaleContenders {
		row := &scaleRow{name: c.name}
		for range cfg.repeats {
			r, err := runManyNames(ctx, addr, c, scaleWorkers, scaleClients, scaleNames, scaleHold, cfg.duration)
			if err != nil {
				return nil, fmt.Errorf("%s: many names: %w", c.name, err)
			}
			row.many = append(row.many, r)
		}
		h, err := runManyHeld(ctx, addr, c, cfg.held, cfg.waiters, 10, 3*time.Second)
		if err != nil {
			row.error = err.Error() // reported in the table; the other libraries go on
			fmt.Printf("%-28s many held: %v\n", c.name, err)
		}
		row.held = h
		m := row.many
		fmt.Printf("%-28s many names %6.0f ops/s p99 %v; held %d: %.0f B/lock in Redis, %d B key; %d waiters: %.0f B each in Redis, %.0f B each here, %.2f sent and %.2f run by Redis per waiter-s, hand-off p50 %v p99 %v\n",
			c.name, medianF(m, func(x manyNames) float64 { return x.perSec }), medianD(m, func(x manyNames) time.Duration { return x.p99 }),
			h.held, h.memPerHeld, h.keyUsage, h.waiters, h.memPerWaiter, h.procMemPerWaiter, h.sentPerWaiterSecond, h.serverCmdsPerWaiterSecond, h.handoffP50, h.handoffP99)
		rows = append(rows, row)
	}
	return rows, nil
}

// scaleTables is the scale workloads as Markdown.
func scaleTables(rows []*scaleRow, cfg config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d workers (goroutines over %d clients, each client a process) lock a random one of %d names, hold it %v and release it, for %v; medians of %d repeats. "+
		"An operation is one acquire+hold+release; its latency includes the hold. Redis commands are `INFO commandstats` deltas (scripts' commands included), CPU as in section 1.\n\n",
		scaleWorkers, scaleClients, scaleNames, scaleHold, cfg.duration, cfg.repeats)
	fmt.Fprintf(&b, "| library | operations/s | p50 | p99 | process CPU / op | Redis CPU / op | Redis commands / op |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		m := r.many
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %.1f µs | %.1f µs | %.2f |\n", r.name,
			medianF(m, func(x manyNames) float64 { return x.perSec }),
			us(medianD(m, func(x manyNames) time.Duration { return x.p50 })),
			us(medianD(m, func(x manyNames) time.Duration { return x.p99 })),
			float64(medianD(m, func(x manyNames) time.Duration { return x.procCPU }))/1e3,
			float64(medianD(m, func(x manyNames) time.Duration { return x.redisCPU }))/1e3,
			medianF(m, func(x manyNames) float64 { return x.commands }))
	}
	fmt.Fprintf(&b, "\nThen one client holds %d locks, and %d goroutines (over 10 clients with go-redis's default pool) wait, each on one of the first %d of them, for 3 s; then the holder releases those one after another, and the hand-off is the time from each release to its waiter holding the lock. "+
		"Redis memory is `used_memory` deltas (with the server's side of the waiters' connections, and of key tracking where a library uses it); "+
		"the key's own size is `MEMORY USAGE` of one held lock's key; process memory is this process's heap in use plus goroutine stacks, after a GC, per waiting goroutine. "+
		"The 1 ms polling configurations are left out here: a thousand waiters polling every millisecond would be a million commands a second. "+
		"go-redis-lock's waits run on connections of its own, which a hook on the caller's client does not see: its commands sent count its tries only; Redis's count is all of them.\n\n",
		cfg.held, cfg.waiters, cfg.waiters)
	fmt.Fprintf(&b, "| library | Redis memory / held lock | MEMORY USAGE of its key | Redis memory / waiter | process memory / waiting goroutine | commands sent / waiter-second | Redis commands / waiter-second | hand-off p50 | hand-off p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var notes []string
	for _, r := range rows {
		h := r.held
		if r.error != "" {
			fmt.Fprintf(&b, "| %s | — | — | — | — | — | — | — | — |\n", r.name)
			notes = append(notes, fmt.Sprintf("%s did not complete: %s.", r.name, r.error))
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f B | %d B | %.0f B | %.0f B | %.2f | %.2f | %s | %s |\n", r.name, h.memPerHeld, h.keyUsage, h.memPerWaiter, h.procMemPerWaiter, h.sentPerWaiterSecond, h.serverCmdsPerWaiterSecond, us(h.handoffP50), us(h.handoffP99))
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}
