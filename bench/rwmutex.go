package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// The RWMutex workload: one writer and four readers loop lock, hold 1 ms,
// unlock on one RWMutex name for a while, once with a client each and once
// all on one client (as goroutines of one process share a client): the
// second must not be slower by more than the client's own contention.

// rwRun is one run of the RWMutex workload.
type rwRun struct {
	shared        bool          // all on one client
	acquisitions  int64         // reads and writes taken
	writes        int64         // of them, writes
	p99, worst    time.Duration // wait for a hold, over every acquisition
	perSecond     float64
	duration      time.Duration
	writersWaited time.Duration // the writer's longest wait
}

func runRW(ctx context.Context, addr string, d time.Duration) ([]rwRun, error) {
	var runs []rwRun
	for _, shared := range []bool{false, true} {
		r, err := rwOnce(ctx, addr, shared, d)
		if err != nil {
			return nil, err
		}
		how := "a client each"
		if shared {
			how = "one client"
		}
		fmt.Printf("rwmutex, 1 writer + 4 readers, %-13s: %6d acquisitions in %v (%.0f/s; %d writes), wait p99 %v, longest %v, writer's longest %v\n",
			how, r.acquisitions, d, r.perSecond, r.writes, r.p99, r.worst, r.writersWaited)
		runs = append(runs, r)
	}
	return runs, nil
}

func rwOnce(ctx context.Context, addr string, shared bool, d time.Duration) (rwRun, error) {
	const readers, hold = 4, time.Millisecond
	name := uniqueName("rw")
	var clients []*redis.Client
	client := func() *redis.Client {
		if shared && len(clients) > 0 {
			return clients[0]
		}
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		clients = append(clients, c)
		return c
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	run := rwRun{shared: shared, duration: d}
	var (
		mu     sync.Mutex
		waits  []time.Duration
		failed firstError
		wg     sync.WaitGroup
		total  atomic.Int64
		writes atomic.Int64
	)
	stop := time.Now().Add(d)
	for i := range 1 + readers {
		writer := i == 0
		rw, err := redislock.NewRWMutex(client(), name)
		if err != nil {
			return run, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var p *redislock.Permit
			lock := func(ctx context.Context) (err error) {
				p, err = rw.RLock(ctx)
				return err
			}
			unlock := func(ctx context.Context) error { return p.Release(ctx) }
			if writer {
				lock, unlock = rw.Lock, rw.Unlock
			}
			var mine []time.Duration
			for time.Now().Before(stop) {
				began := time.Now()
				if err := lock(ctx); err != nil {
					failed.set(err)
					return
				}
				mine = append(mine, time.Since(began))
				time.Sleep(hold)
				if err := unlock(ctx); err != nil {
					failed.set(err)
					return
				}
				total.Add(1)
				if writer {
					writes.Add(1)
				}
			}
			mu.Lock()
			waits = append(waits, mine...)
			if writer {
				run.writersWaited = percentile(mine, 1)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := failed.get(); err != nil {
		return run, err
	}
	run.acquisitions, run.writes = total.Load(), writes.Load()
	run.perSecond = float64(run.acquisitions) / d.Seconds()
	run.p99, run.worst = percentile(waits, 0.99), percentile(waits, 1)
	return run, nil
}
