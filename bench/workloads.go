package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// cycles is an acquire+release loop's result.
type cycles struct {
	perSec   float64
	p50, p99 time.Duration
	commands float64 // per cycle
}

// contention is the contended workload's result.
type contention struct {
	perSec            float64       // acquisitions per second
	handoffP50        time.Duration // release returns -> another worker's acquire returns
	handoffP99        time.Duration
	fromCallP50       time.Duration // release called -> another worker's acquire returns
	commands          float64       // per acquisition, counted by the client hook
	serverCmds        float64       // per acquisition, counted by Redis (INFO commandstats); 0 without admin
	procCPU, redisCPU time.Duration // per acquisition; Redis's 0 without admin
	waitP99, longest  time.Duration // of a lock call
	minWorker, maxWkr int
	jain              float64
}

// waiting is the waiters workload's result.
type waiting struct {
	commands  int64         // sent by all waiters during the hold
	firstWake time.Duration // release called -> first waiter holding
	unlockRTT time.Duration // release called -> release returned
}

// count is the counter workload's result.
type count struct {
	lost       int
	perSec     float64
	commands   float64       // lock commands per increment, counted by the client hook
	serverCmds float64       // lock commands per increment, counted by Redis (the data's GET and SET left out); 0 without admin
	procCPU    time.Duration // per increment (the data's GET and SET included)
	redisCPU   time.Duration // per increment (the same); 0 without admin
	longest    time.Duration // of a lock call
}

type contenderResult struct {
	name      string
	allocs    int64 // per uncontended cycle, from testing.Benchmark
	contended []contention
	waiters   []waiting
}

func pingBaseline(ctx context.Context, addr string, n int) time.Duration {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t := time.Now()
		c.Ping(ctx)
		lat = append(lat, time.Since(t))
	}
	return median(lat)
}

// rawBaseline is the lock a hand-written client would use: SET NX PX, then
// DEL, without ownership checks or waiting.
func rawBaseline(ctx context.Context, addr string, d time.Duration) cycles {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < d {
		t := time.Now()
		c.SetNX(ctx, "raw-lock", "x", benchTTL)
		c.Del(ctx, "raw-lock")
		lat = append(lat, time.Since(t))
	}
	return cycles{perSec: float64(len(lat)) / time.Since(start).Seconds(), p50: median(lat), p99: percentile(lat, 0.99), commands: 2}
}

// allocsPerCycle measures the allocations of one uncontended cycle with
// testing.Benchmark.
func allocsPerCycle(ctx context.Context, addr string, c contender) int64 {
	var sent atomic.Int64
	w, err := c.worker(withHook(addr, &sent), uniqueName("allocs"))
	if err != nil {
		return -1
	}
	defer w.close()
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := w.lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := w.unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	return r.AllocsPerOp()
}

// firstError keeps the first error the workers of a workload report.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

var nameSeq atomic.Int64

func uniqueName(kind string) string {
	return "bench-" + kind + "-" + strconv.FormatInt(nameSeq.Add(1), 10)
}

// grant is one acquisition in the contended workload, in grant order.
type grant struct {
	worker           int
	waited           time.Duration // in the lock call
	acquired         time.Time
	called, returned time.Time // its release
}

// contended runs n workers on one name for d, each holding for hold. With
// admin it also counts the commands Redis ran, from INFO commandstats.
func contended(ctx context.Context, addr string, c contender, n int, d, hold time.Duration, admin *redis.Client) (contention, error) {
	var sent atomic.Int64
	name := uniqueName("contended")
	workers := make([]worker, n)
	for i := range workers {
		w, err := c.worker(withHook(addr, &sent), name)
		if err != nil {
			return contention{}, err
		}
		defer w.close()
		workers[i] = w
	}
	var (
		mu     sync.Mutex // guards grants
		grants []*grant
		wg     sync.WaitGroup
		failed firstError
	)
	s0, err := sampleIf(ctx, admin)
	if err != nil {
		return contention{}, err
	}
	cpu0 := processCPU()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t := time.Now()
				if err := w.lock(ctx); err != nil {
					if ctx.Err() == nil {
						failed.set(err)
					}
					return
				}
				g := &grant{worker: i, acquired: time.Now()}
				g.waited = g.acquired.Sub(t)
				mu.Lock()
				grants = append(grants, g)
				mu.Unlock()
				time.Sleep(hold)
				called := time.Now()
				err := w.unlock(context.WithoutCancel(ctx))
				returned := time.Now()
				mu.Lock()
				g.called, g.returned = called, returned
				mu.Unlock()
				if err != nil {
					failed.set(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := processCPU()
	if err := failed.get(); err != nil {
		return contention{}, err
	}
	s1, err := sampleIf(context.WithoutCancel(ctx), admin)
	if err != nil {
		return contention{}, err
	}
	var fromReturn, fromCall, waits []time.Duration
	per := make([]int, n)
	for i, g := range grants {
		per[g.worker]++
		waits = append(waits, g.waited)
		if i == 0 || grants[i-1].worker == g.worker || grants[i-1].returned.IsZero() {
			continue
		}
		fromReturn = append(fromReturn, g.acquired.Sub(grants[i-1].returned))
		fromCall = append(fromCall, g.acquired.Sub(grants[i-1].called))
	}
	if len(grants) == 0 {
		return contention{}, errors.New("no acquisition")
	}
	res := contention{
		perSec:      float64(len(grants)) / elapsed.Seconds(),
		handoffP50:  median(fromReturn),
		handoffP99:  percentile(fromReturn, 0.99),
		fromCallP50: median(fromCall),
		commands:    float64(sent.Load()) / float64(len(grants)),
		serverCmds:  float64(serverCommands(s0, s1, 0)) / float64(len(grants)),
		procCPU:     (cpu1 - cpu0) / time.Duration(len(grants)),
		redisCPU:    (s1.cpu - s0.cpu) / time.Duration(len(grants)),
		waitP99:     percentile(waits, 0.99),
		longest:     slices.Max(waits),
		minWorker:   slices.Min(per),
		maxWkr:      slices.Max(per),
		jain:        jain(per),
	}
	return res, nil
}

// jain is Jain's fairness index of the workers' shares: 1 when all got the
// same, 1/n when one got everything.
func jain(per []int) float64 {
	var sum, sumSq float64
	for _, k := range per {
		sum += float64(k)
		sumSq += float64(k) * float64(k)
	}
	if sumSq == 0 {
		return 0
	}
	return sum * sum / (float64(len(per)) * sumSq)
}

// sampleIf samples the server through admin, when there is one.
func sampleIf(ctx context.Context, admin *redis.Client) (serverSample, error) {
	if admin == nil {
		return serverSample{}, nil
	}
	return sampleServer(ctx, admin)
}

// serverCommands is what commandsSince counts between a and b, less the
// connection set-up (HELLO, CLIENT SETINFO) and less others: commands the
// workload itself sent that are not the lock's (a counter's GET and SET).
// 0 when a was not sampled.
func serverCommands(a, b serverSample, others int64) int64 {
	if a.calls == nil {
		return 0
	}
	all, _ := commandsSince(a, b)
	for name, n := range b.calls {
		if name == "hello" || name == "client|setinfo" {
			all -= n - a.calls[name]
		}
	}
	return all - others
}

// waiters holds a lock for hold while n waiters block on it, counts what
// the waiters send meanwhile, then releases and times the first waiter.
func waiters(ctx context.Context, addr string, c contender, n int, hold time.Duration) (waiting, error) {
	name := uniqueName("waiters")
	var holderSent, sent atomic.Int64
	holder, err := c.worker(withHook(addr, &holderSent), name)
	if err != nil {
		return waiting{}, err
	}
	defer holder.close()
	if err := holder.lock(ctx); err != nil {
		return waiting{}, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan time.Time, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		w, err := c.worker(withHook(addr, &sent), name)
		if err != nil {
			return waiting{}, err
		}
		defer w.close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.lock(wctx); err != nil {
				return
			}
			got <- time.Now()
			w.unlock(context.WithoutCancel(ctx))
		}()
	}
	time.Sleep(200 * time.Millisecond) // let every waiter make its first attempt
	before := sent.Load()
	time.Sleep(hold)
	during := sent.Load() - before
	released := time.Now()
	if err := holder.unlock(ctx); err != nil {
		return waiting{}, err
	}
	unlockRTT := time.Since(released)
	var first time.Duration
	select {
	case at := <-got:
		first = at.Sub(released)
	case <-time.After(30 * time.Second):
		cancel()
		wg.Wait()
		return waiting{}, fmt.Errorf("no waiter got the lock within 30s of the release")
	}
	cancel()
	wg.Wait()
	return waiting{commands: during * int64(2*time.Second) / int64(hold), firstWake: first, unlockRTT: unlockRTT}, nil
}

// counter runs n workers that each increment a counter rounds times, non
// atomically (GET, then SET), under the lock. With admin it also counts the
// lock's commands Redis ran, from INFO commandstats.
func counter(ctx context.Context, addr string, c contender, n, rounds int, admin *redis.Client) (count, error) {
	name := uniqueName("counter")
	key := name + ":value"
	var sent atomic.Int64
	data := redis.NewClient(&redis.Options{Addr: addr})
	defer data.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var (
		wg      sync.WaitGroup
		failed  firstError
		longest = make([]time.Duration, n)
	)
	workers := make([]worker, n)
	for i := range workers {
		w, err := c.worker(withHook(addr, &sent), name)
		if err != nil {
			return count{}, err
		}
		defer w.close()
		workers[i] = w
	}
	s0, err := sampleIf(ctx, admin)
	if err != nil {
		return count{}, err
	}
	cpu0 := processCPU()
	start := time.Now()
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				t := time.Now()
				err := w.lock(ctx)
				longest[i] = max(longest[i], time.Since(t))
				if err == nil {
					var v int
					v, err = data.Get(ctx, key).Int()
					if errors.Is(err, redis.Nil) {
						err = nil
					}
					if err == nil {
						err = data.Set(ctx, key, v+1, 0).Err()
					}
					if uerr := w.unlock(ctx); err == nil {
						err = uerr
					}
				}
				if err != nil {
					failed.set(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := processCPU()
	if err := failed.get(); err != nil {
		return count{}, err
	}
	v, err := data.Get(ctx, key).Int()
	if err != nil {
		return count{}, err
	}
	s1, err := sampleIf(ctx, admin)
	if err != nil {
		return count{}, err
	}
	total := n * rounds
	return count{
		lost:       total - v,
		perSec:     float64(total) / elapsed.Seconds(),
		commands:   float64(sent.Load()) / float64(total),
		serverCmds: float64(serverCommands(s0, s1, int64(2*total+1))) / float64(total), // each increment's GET and SET, and the GET above
		longest:    slices.Max(longest),
		procCPU:    (cpu1 - cpu0) / time.Duration(total),
		redisCPU:   (s1.cpu - s0.cpu) / time.Duration(total),
	}, nil
}
