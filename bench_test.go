package redislock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// Benchmarks against a real redis-server started for each. Compare the
// lock's figures with the baselines of the same run (BenchmarkPing,
// BenchmarkSetNXDel), never with figures from another machine or run:
//
//	go test -run '^$' -bench . -benchmem -count 5 .

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
	for b.Loop() {
		if err := c.SetNX(ctx, "lock:bench", "id", 10*time.Second).Err(); err != nil {
			b.Fatal(err)
		}
		if err := c.Del(ctx, "lock:bench").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	s := redistest.Start(b)
	l := mustNew(b, s.Client(), "bench", redislock.WithExpire(10*time.Second))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
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

// BenchmarkLossDetection measures, per iteration, the time from another
// client deleting a renewed lock's key to Done closing, as a fraction of
// the expire (the renewal interval is 2/3 of it, so the expected median is
// about 1/3):
//
//	go test -run '^$' -bench LossDetection -benchtime 20x .
func BenchmarkLossDetection(b *testing.B) {
	const expire = 300 * time.Millisecond
	s := redistest.Start(b)
	admin := s.Client()
	ctx := context.Background()
	l := mustNew(b, s.Client(), "bench", redislock.WithExpire(expire), redislock.WithAutoRenewal())
	var lat []time.Duration
	i := 0
	for b.Loop() {
		if err := l.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		// Delete at a different point of the renewal cycle each time.
		time.Sleep(time.Duration(i%10) * expire / 15)
		i++
		deleted := time.Now()
		admin.Del(ctx, l.Key())
		<-l.Done()
		lat = append(lat, time.Since(deleted))
	}
	b.StopTimer()
	l.Release(ctx)
	b.ReportMetric(float64(median(lat))/float64(time.Millisecond), "detect-p50-ms")
	b.ReportMetric(float64(median(lat))/float64(expire), "detect/expire")
}

// BenchmarkRenewalCommands holds a renewed lock for one second of renewals
// per iteration and reports the commands it sent per minute, scaled to a
// 30 s expire (renewals are periodic: the count scales as 1/expire).
//
//	go test -run '^$' -bench RenewalCommands -benchtime 3x .
func BenchmarkRenewalCommands(b *testing.B) {
	const expire = 150 * time.Millisecond
	s := redistest.Start(b)
	admin := s.Client()
	ctx := context.Background()
	l := mustNew(b, s.Client(), "bench", redislock.WithExpire(expire), redislock.WithAutoRenewal())
	var cmds int64
	var held time.Duration
	for b.Loop() {
		if err := l.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		before := commandStats(b, admin)
		start := time.Now()
		time.Sleep(time.Second)
		d := delta(before, commandStats(b, admin))
		held += time.Since(start)
		cmds += d["evalsha"] + d["eval"]
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	perMin := float64(cmds) / held.Minutes()
	b.ReportMetric(perMin, "cmds/min")
	b.ReportMetric(perMin*float64(expire)/float64(30*time.Second), "cmds/min@30s-expire")
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
