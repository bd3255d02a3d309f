package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// The family workload: the Semaphore beside the Lock, on one code path.
// 16 workers, each with a client of its own, loop acquire, hold 1 ms,
// release, on a semaphore of size 4 and on a Lock; then 32 waiters block
// on a full semaphore (and on a held Lock) while the holders hold.

// familyCase is one primitive of the family workload.
type familyCase struct {
	name string
	size int // holders at once: 1 for the Lock
	// worker returns a fresh holder of name on c.
	worker func(c *redis.Client, name string) (worker, error)
}

var familyCases = []familyCase{
	{"Lock", 1, func(c *redis.Client, name string) (worker, error) {
		l, err := redislock.New(c, name, redislock.WithExpire(benchTTL))
		return ourWorker{l, c}, err
	}},
	{"Semaphore, size 4", 4, func(c *redis.Client, name string) (worker, error) {
		s, err := redislock.NewSemaphore(c, name, 4, redislock.WithExpire(benchTTL))
		return &semWorker{s: s, c: c}, err
	}},
}

type semWorker struct {
	s *redislock.Semaphore
	p *redislock.Permit // the one held
	c *redis.Client
}

func (w *semWorker) lock(ctx context.Context) (err error) {
	w.p, err = w.s.Acquire(ctx)
	return err
}
func (w *semWorker) unlock(ctx context.Context) error { return w.p.Release(ctx) }
func (w *semWorker) close()                           { w.c.Close() }

// familyRun is one run of the family workload for one case.
type familyRun struct {
	perSec          float64       // acquisitions per second, 16 workers
	commands        float64       // commands sent per acquisition
	handoffP50      time.Duration // a release's call to the grant it made room for
	handoffP99      time.Duration
	most            int     // holders inside at once, at most
	waitCmdsPerWS   float64 // commands sent per waiter-second by 32 blocked waiters
	firstWake       time.Duration
	wakeAllAfterRel time.Duration // the release of every holder to the last of size waiters in
}

type familyResult struct {
	c    familyCase
	runs []familyRun
}

func runFamily(ctx context.Context, addr string, cfg config) ([]*familyResult, error) {
	var out []*familyResult
	for _, fc := range familyCases {
		res := &familyResult{c: fc}
		for range cfg.repeats {
			r, err := familyOnce(ctx, addr, fc, cfg.duration, cfg.hold)
			if err != nil {
				return nil, fmt.Errorf("family %s: %w", fc.name, err)
			}
			res.runs = append(res.runs, r)
		}
		log.Printf("%-20s %6.0f acq/s  %.2f cmds/acq  hand-off p50 %v p99 %v  at most %d inside  waiting %.2f cmds/waiter-s  wake of %d after release %v",
			fc.name, medianF(res.runs, func(r familyRun) float64 { return r.perSec }),
			medianF(res.runs, func(r familyRun) float64 { return r.commands }),
			medianD(res.runs, func(r familyRun) time.Duration { return r.handoffP50 }),
			medianD(res.runs, func(r familyRun) time.Duration { return r.handoffP99 }),
			maxMost(res.runs), medianF(res.runs, func(r familyRun) float64 { return r.waitCmdsPerWS }),
			fc.size, medianD(res.runs, func(r familyRun) time.Duration { return r.wakeAllAfterRel }))
		if m := maxMost(res.runs); m > fc.size {
			return nil, fmt.Errorf("family %s: %d holders inside at once, size %d", fc.name, m, fc.size)
		}
		out = append(out, res)
	}
	return out, nil
}

func maxMost(rs []familyRun) int {
	m := 0
	for _, r := range rs {
		m = max(m, r.most)
	}
	return m
}

func familyOnce(ctx context.Context, addr string, fc familyCase, d, hold time.Duration) (familyRun, error) {
	const n = 16
	var sent atomic.Int64
	name := uniqueName("family")
	workers := make([]worker, n)
	for i := range workers {
		w, err := fc.worker(goredisClient(withHook(addr, &sent)), name)
		if err != nil {
			return familyRun{}, err
		}
		defer w.close()
		workers[i] = w
	}
	var (
		mu       sync.Mutex // guards the fields below
		released []time.Time
		grants   int
		handoffs []time.Duration
		inside   int
		most     int
		wg       sync.WaitGroup
		failed   firstError
	)
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rctx.Err() == nil {
				if err := w.lock(rctx); err != nil {
					if rctx.Err() == nil {
						failed.set(err)
					}
					return
				}
				now := time.Now()
				mu.Lock()
				grants++
				inside++
				most = max(most, inside)
				if grants > fc.size && len(released) > 0 {
					// The grant the oldest unpaired release made room for.
					handoffs = append(handoffs, now.Sub(released[0]))
					released = released[1:]
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				inside--
				// From the release call: the grant it makes room for may
				// come before the release's own reply.
				released = append(released, time.Now())
				mu.Unlock()
				err := w.unlock(context.WithoutCancel(rctx))
				if err != nil {
					failed.set(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := failed.get(); err != nil {
		return familyRun{}, err
	}
	if grants == 0 {
		return familyRun{}, fmt.Errorf("no acquisition")
	}
	r := familyRun{
		perSec:     float64(grants) / elapsed.Seconds(),
		commands:   float64(sent.Load()) / float64(grants),
		handoffP50: median(handoffs),
		handoffP99: percentile(handoffs, 0.99),
		most:       most,
	}
	var err error
	r.waitCmdsPerWS, r.firstWake, r.wakeAllAfterRel, err = familyWaiters(ctx, addr, fc, hold)
	return r, err
}

// familyWaiters fills the primitive (size holders), blocks 32 waiters on
// it for hold, counts what the waiters send meanwhile, then releases every
// holder at once and times the first, and the size-th, waiter in.
func familyWaiters(ctx context.Context, addr string, fc familyCase, hold time.Duration) (perWaiterSecond float64, first, all time.Duration, err error) {
	const n = 32
	name := uniqueName("family-waiters")
	var holders []worker
	for range fc.size {
		h, err := fc.worker(goredisClient(clientCfg{addr: addr}), name)
		if err != nil {
			return 0, 0, 0, err
		}
		defer h.close()
		if err := h.lock(ctx); err != nil {
			return 0, 0, 0, err
		}
		holders = append(holders, h)
	}
	var sent atomic.Int64
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan time.Time, n)
	var wg sync.WaitGroup
	for range n {
		w, err := fc.worker(goredisClient(withHook(addr, &sent)), name)
		if err != nil {
			return 0, 0, 0, err
		}
		defer w.close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.lock(wctx); err != nil {
				return
			}
			got <- time.Now()
			<-wctx.Done() // hold on: the figure is the wake-up of size waiters
			w.unlock(context.WithoutCancel(ctx))
		}()
	}
	time.Sleep(200 * time.Millisecond) // every waiter makes its first attempt
	before := sent.Load()
	time.Sleep(hold)
	during := sent.Load() - before
	released := time.Now()
	var rwg sync.WaitGroup
	for _, h := range holders {
		rwg.Add(1)
		go func() { defer rwg.Done(); h.unlock(ctx) }()
	}
	rwg.Wait()
	for i := range fc.size {
		select {
		case at := <-got:
			if i == 0 {
				first = at.Sub(released)
			}
			all = at.Sub(released)
		case <-time.After(30 * time.Second):
			cancel()
			wg.Wait()
			return 0, 0, 0, fmt.Errorf("%d of %d waiters in within 30s of the releases", i, fc.size)
		}
	}
	cancel()
	wg.Wait()
	return float64(during) / (float64(n) * hold.Seconds()), first, all, nil
}

// familySection reports the family workload.
func (r *report) familySection(b *strings.Builder) {
	if len(r.family) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## 9. The family: Semaphore beside the Lock\n\n")
	fmt.Fprintf(b, "16 workers, each on a client of its own, loop acquire, hold 1 ms, release (%v per run); then 32 waiters block on the full primitive for %v and every holder releases at once. Medians of %d runs; commands are those the clients sent.\n\n", r.cfg.duration, r.cfg.hold, r.cfg.repeats)
	fmt.Fprintf(b, "| primitive | acquisitions/s | commands per acquisition | hand-off p50 (from the release call) | hand-off p99 | most inside at once | commands per waiter-second while waiting | first waiter in after the releases | all freed permits taken after |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range r.family {
		rs := f.runs
		fmt.Fprintf(b, "| %s | %.0f | %.2f | %s | %s | %d of %d | %.2f | %s | %s |\n", f.c.name,
			medianF(rs, func(x familyRun) float64 { return x.perSec }),
			medianF(rs, func(x familyRun) float64 { return x.commands }),
			us(medianD(rs, func(x familyRun) time.Duration { return x.handoffP50 })),
			us(medianD(rs, func(x familyRun) time.Duration { return x.handoffP99 })),
			maxMost(rs), f.c.size,
			medianF(rs, func(x familyRun) float64 { return x.waitCmdsPerWS }),
			us(medianD(rs, func(x familyRun) time.Duration { return x.firstWake })),
			us(medianD(rs, func(x familyRun) time.Duration { return x.wakeAllAfterRel })))
	}
}
