package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// Benchmarks against a real redis-server started for each. Compare the
// lock's figures with the baselines of the same run (BenchmarkPing,
// BenchmarkSetNXDel), never with figures from another machine or run:
//
//	go test -run '^$' -bench . -benchmem -count 5 .
//
// The cycles also report cpu-µs/op: this process's user+sys CPU per
// iteration (getrusage), its goroutines and the go-redis client's included
// and the server's left out, so that a change that saves wall time by
// burning CPU shows.

// reportCPU, deferred at the start of a benchmark's loop, reports the
// process's CPU per iteration since then.
func reportCPU(b *testing.B) func() {
	start, ok := processCPU()
	return func() {
		end, _ := processCPU()
		if ok && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
		}
	}
}

func BenchmarkPing(b *testing.B) {
	s := redistest.Start(b)
	c := s.Client()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetNXDel is the raw lock a hand-written client would use: SET NX
// PX, then DEL (without any ownership check).
func BenchmarkSetNXDel(b *testing.B) {
	s := redistest.Start(b)
	c := s.Client()
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if err := c.SetNX(ctx, "lock:bench", "id", 10*time.Second).Err(); err != nil {
			b.Fatal(err)
		}
		if err := c.Del(ctx, "lock:bench").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireRelease measures the uncontended cycle, with and
// without tracking, with tracking beside another hold of the client (its
// watch busy: the cycle's holds fire its wake timer, reported as
// fires/op), and (without tracking) with what observes it: a logger that
// discards at INFO (its lines are built and dropped), and an observer that
// does nothing (the cost of the hook calls themselves).
// redislockotel's BenchmarkAcquireReleaseOTel is the same cycle with the
// OpenTelemetry observer.
func BenchmarkAcquireRelease(b *testing.B) {
	s := redistest.Start(b)
	ctx := context.Background()
	discard := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for _, c := range []struct {
		name   string
		beside bool // another Lock of the client holds meanwhile
		opts   []redislock.Option
	}{
		{"tracking=true", false, nil},
		{"tracking=true/beside-a-hold", true, nil},
		{"tracking=false", false, []redislock.Option{redislock.WithTracking(false)}},
		{"tracking=false/logger=info", false, []redislock.Option{redislock.WithTracking(false), redislock.WithLogger(discard)}},
		{"tracking=false/observer=nop", false, []redislock.Option{redislock.WithTracking(false), redislock.WithObserver(&redislock.Observer{})}},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := s.Client()
			l := mustNew(b, client, "bench", append([]redislock.Option{redislock.WithExpire(10 * time.Second)}, c.opts...)...)
			if c.beside {
				other := mustNew(b, client, "other", redislock.WithExpire(time.Minute))
				if err := other.Acquire(ctx); err != nil {
					b.Fatal(err)
				}
				defer other.Release(ctx)
			}
			b.ReportAllocs()
			defer reportCPU(b)()
			fires := redislock.TrackerWakeFires(client)
			defer func() {
				b.ReportMetric(float64(redislock.TrackerWakeFires(client)-fires)/float64(b.N), "fires/op")
			}()
			for b.Loop() {
				if err := l.Acquire(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandoff measures, per iteration, the time from a holder calling
// Release to a waiter (already blocked in BLPOP, with its own client)
// returning from Acquire, the same from Release returning (negative when
// the waiter holds the lock before the releaser hears back), and a PING
// round trip on the same server. It reports the medians and the ratio of
// the first to PING; ns/op is not the figure to read (each iteration also
// waits for the waiter to block).
//
//	go test -run '^$' -bench Handoff -benchtime 100x .
func BenchmarkHandoff(b *testing.B) {
	s := redistest.Start(b)
	admin := s.Client()
	ctx := context.Background()
	locks := []*redislock.Lock{
		mustNew(b, s.Client(), "bench", redislock.WithExpire(10*time.Second)),
		mustNew(b, s.Client(), "bench", redislock.WithExpire(10*time.Second)),
	}
	if err := locks[0].Acquire(ctx); err != nil {
		b.Fatal(err)
	}
	var fromCall, fromReturn, pings []time.Duration
	i := 0
	for b.Loop() {
		holder, waiter := locks[i%2], locks[(i+1)%2]
		i++
		done := make(chan time.Time, 1)
		go func() {
			if err := waiter.Acquire(ctx); err != nil {
				b.Error(err)
			}
			done <- time.Now()
		}()
		waitBlocked(b, admin, 1)

		t0 := time.Now()
		if err := admin.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		pings = append(pings, time.Since(t0))

		called := time.Now()
		if err := holder.Release(ctx); err != nil {
			b.Fatal(err)
		}
		returned := time.Now()
		held := <-done
		fromCall = append(fromCall, held.Sub(called))
		fromReturn = append(fromReturn, held.Sub(returned))
	}
	b.StopTimer()
	if err := locks[i%2].Release(ctx); err != nil {
		b.Fatal(err)
	}
	h, p := median(fromCall), median(pings)
	b.ReportMetric(float64(h)/1e3, "handoff-p50-µs")
	b.ReportMetric(float64(median(fromReturn))/1e3, "after-return-p50-µs")
	b.ReportMetric(float64(p)/1e3, "ping-p50-µs")
	b.ReportMetric(float64(h)/float64(p), "handoff/ping")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkLossDetection measures how soon a renewing holder (30 s
// expire: renewal every 20 s) is told that someone else changed its key,
// with key tracking on (the default) and off, for a DEL, a Reset and a
// takeover (another owner's SET): the p50 and p99 of the time from the
// change to Done closing. With tracking off the loss is found at the next
// renewal, so that case uses a 300 ms expire (renewal every 200 ms) and
// reports the latency as a fraction of the expire too.
//
//	go test -run '^$' -bench LossDetection -benchtime 50x .
func BenchmarkLossDetection(b *testing.B) {
	s := redistest.Start(b)
	admin := s.Client()
	ctx := context.Background()
	for _, tracking := range []bool{true, false} {
		for _, c := range lossCases {
			b.Run(fmt.Sprintf("tracking=%v/%s", tracking, strings.ReplaceAll(c.name, " ", "_")), func(b *testing.B) {
				expire := 30 * time.Second
				if !tracking {
					expire = 300 * time.Millisecond
				}
				l := mustNew(b, s.Client(), "bench", redislock.WithExpire(expire), redislock.WithAutoRenewal(), redislock.WithTracking(tracking))
				var lat []time.Duration
				i := 0
				for b.Loop() {
					if err := l.Acquire(ctx); err != nil {
						b.Fatal(err)
					}
					// Change the key at a different point of the renewal cycle each time.
					time.Sleep(time.Duration(i%10) * min(expire, time.Second) / 15)
					i++
					changed := time.Now()
					if err := c.change(ctx, admin, l.Key()); err != nil {
						b.Fatal(err)
					}
					<-l.Done()
					lat = append(lat, time.Since(changed))
					admin.Del(ctx, l.Key())
				}
				b.StopTimer()
				slices.Sort(lat)
				p99 := lat[max(int(float64(len(lat))*0.99+0.999999)-1, 0)]
				b.ReportMetric(float64(lat[(len(lat)-1)/2])/float64(time.Millisecond), "p50-ms")
				b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99-ms")
				if !tracking {
					b.ReportMetric(float64(lat[(len(lat)-1)/2])/float64(expire), "p50/expire")
				}
			})
		}
	}
}

// BenchmarkRenewalCommands holds a renewed lock for one second of renewals
// per iteration, with key tracking on and off, and reports the commands
// clients sent per minute (the extend scripts, and the tracker's GET after
// each), scaled to a 30 s expire (renewals are periodic: the count scales
// as 1/expire). INFO commandstats also counts the commands a script runs:
// each extend script runs one GET, which is not a command sent.
//
//	go test -run '^$' -bench RenewalCommands -benchtime 3x .
func BenchmarkRenewalCommands(b *testing.B) {
	const expire = 150 * time.Millisecond
	s := redistest.Start(b)
	admin := s.Client()
	ctx := context.Background()
	for _, tracking := range []bool{true, false} {
		b.Run(fmt.Sprintf("tracking=%v", tracking), func(b *testing.B) {
			l := mustNew(b, s.Client(), "bench", redislock.WithExpire(expire), redislock.WithAutoRenewal(), redislock.WithTracking(tracking))
			var renewals, gets int64
			var held time.Duration
			for b.Loop() {
				if err := l.Acquire(ctx); err != nil {
					b.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond) // the tracker's first GET falls outside the window
				before := commandStats(b, admin)
				start := time.Now()
				time.Sleep(time.Second)
				d := delta(before, commandStats(b, admin))
				held += time.Since(start)
				renewals += d["evalsha"] + d["eval"]
				gets += d["get"] - (d["evalsha"] + d["eval"]) // less the extend scripts' own GET
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			scale := float64(expire) / float64(30*time.Second)
			b.ReportMetric(float64(renewals+gets)/held.Minutes(), "cmds/min")
			b.ReportMetric(float64(renewals+gets)/held.Minutes()*scale, "cmds/min@30s-expire")
			b.ReportMetric(float64(gets)/float64(max(renewals, 1)), "gets/renewal")
		})
	}
}

// BenchmarkTopologies runs, per iteration, one uncontended acquire+release
// on a single node, on a 3-master cluster, and on a primary with one
// replica with WithReplicaAck(1, 1s), and reports the medians and the
// ratios of the last two to the single node's, all from the same run:
//
//	go test -run '^$' -bench Topologies -benchtime 500x .
func BenchmarkTopologies(b *testing.B) {
	ctx := context.Background()
	single := redistest.Start(b)
	cluster := redistest.StartCluster(b, 3)
	primary := redistest.Start(b)
	redistest.StartReplica(b, primary)
	locks := []*redislock.Lock{
		mustNew(b, single.Client(), "bench", redislock.WithExpire(10*time.Second)),
		mustNew(b, cluster.Client(b), "bench", redislock.WithExpire(10*time.Second)),
		mustNew(b, primary.Client(), "bench", redislock.WithExpire(10*time.Second), redislock.WithReplicaAck(1, time.Second)),
	}
	lat := make([][]time.Duration, len(locks))
	for b.Loop() {
		for i, l := range locks {
			start := time.Now()
			if err := l.Acquire(ctx); err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
			lat[i] = append(lat[i], time.Since(start))
		}
	}
	b.StopTimer()
	one, cl, ack := median(lat[0]), median(lat[1]), median(lat[2])
	b.ReportMetric(float64(one)/1e3, "single-p50-µs")
	b.ReportMetric(float64(cl)/1e3, "cluster-p50-µs")
	b.ReportMetric(float64(ack)/1e3, "replica-ack-p50-µs")
	b.ReportMetric(float64(cl)/float64(one), "cluster/single")
	b.ReportMetric(float64(ack)/float64(one), "ack/single")
}

// BenchmarkContended is bench/'s "contended: 8 workers, no hold" in
// miniature, for profiling the library's own work per contended
// acquisition: 8 goroutines, a client and a Lock each on one name, acquire
// then release; an op is one acquisition.
//
//	go test -run '^$' -bench Contended -benchtime 20000x -cpuprofile cpu.out .
func BenchmarkContended(b *testing.B) {
	s := redistest.Start(b)
	for _, tracking := range []bool{true, false} {
		b.Run(fmt.Sprintf("tracking=%v", tracking), func(b *testing.B) {
			contended(b, s, redislock.WithExpire(10*time.Second), redislock.WithTracking(tracking))
		})
	}
	b.Run("protocol-bare", func(b *testing.B) { contendedBare(b, s) })
}

// contendedBare is contended's baseline: the same wire protocol sent
// straight through go-redis, with none of the library's work (no hold, no
// watch, no local queue, no wait lanes): the acquire script as a first
// try, then BLPOP with a plain SET NX pipelined behind it on a connection
// of its own, the release script.
func contendedBare(b *testing.B, s *redistest.Server) {
	keys := []string{"lock:bare", "lock-signal:bare", "lock-signal:bare:turn"}
	var workers []contender
	for i := range 8 {
		c, wc := s.Client(), s.Client(func(o *redis.Options) { o.PoolSize = 1 })
		id := fmt.Sprintf("bare-%d", i)
		handedOff := false
		workers = append(workers, contender{
			acquire: func(ctx context.Context) error { return bareAcquire(ctx, c, wc, keys, id, handedOff) },
			release: func(ctx context.Context) error {
				n, err := wire.Release.Run(ctx, c, keys, id, "1000", "100").Int64()
				handedOff = n == 3 // as core.handedOff: wait first
				return err
			},
		})
	}
	contendedLoop(b, workers)
}

func bareAcquire(ctx context.Context, c, wc *redis.Client, keys []string, id string, waitFirst bool) error {
	if !waitFirst {
		r, err := wire.Acquire.Run(ctx, c, keys, id, "10000", "1", "1").Slice()
		if err != nil || r[0] == int64(0) {
			return err
		}
	}
	for {
		pipe := wc.Pipeline()
		pipe.Do(ctx, "blpop", keys[1], "1")
		set := pipe.Do(ctx, "set", keys[0], id, "nx", "px", "10000")
		_, _ = pipe.Exec(ctx)
		if err := set.Err(); !errors.Is(err, redis.Nil) {
			return err
		}
	}
}

func contended(b *testing.B, s *redistest.Server, opts ...redislock.Option) {
	var workers []contender
	for range 8 {
		l := mustNew(b, s.Client(), "bench", opts...)
		workers = append(workers, contender{l.Acquire, l.Release})
	}
	contendedLoop(b, workers)
}

// contender is one worker of a contended benchmark: its acquire and its
// release.
type contender struct{ acquire, release func(context.Context) error }

// contendedLoop runs the workers, each acquiring and releasing in a loop,
// until b.N acquisitions are done, on a context that can end (as callers'
// do: their waits can be given up), and reports the process's CPU and the
// hand-offs' critical path.
func contendedLoop(b *testing.B, workers []contender) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var left atomic.Int64
	left.Store(int64(b.N))
	var h handoffs
	b.ResetTimer()
	defer reportCPU(b)()
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := w.acquire(ctx); err != nil {
					b.Error(err)
					return
				}
				h.acquired(i)
				h.releasing(i)
				if err := w.release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	h.report(b)
}

// handoffs measures, under contention, the time from one worker's call to
// release to another's acquire returning: the hand-off's critical path.
type handoffs struct {
	mu    sync.Mutex
	by    int
	at    time.Time
	times []time.Duration
}

func (h *handoffs) releasing(worker int) {
	h.mu.Lock()
	h.by, h.at = worker, time.Now()
	h.mu.Unlock()
}

func (h *handoffs) acquired(worker int) {
	now := time.Now()
	h.mu.Lock()
	if !h.at.IsZero() && h.by != worker {
		h.times = append(h.times, now.Sub(h.at))
	}
	h.mu.Unlock()
}

func (h *handoffs) report(b *testing.B) {
	if len(h.times) > 0 {
		b.ReportMetric(float64(median(h.times))/1e3, "handoff-p50-µs")
		b.ReportMetric(float64(len(h.times))/float64(b.N), "handoffs/op")
	}
}
