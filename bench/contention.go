package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The contention matrix: the workloads where several workers want one
// lock at once, run in rounds as the uncontended matrix is (see
// uncontendedMatrix), so that go-redis-lock is compared with its peers
// round by round on a machine whose speed drifts.

// contWorkload is one contended workload.
type contWorkload struct {
	name string
	// run runs it once for c and returns its figures; commands are those
	// Redis ran, counted with admin.
	run func(ctx context.Context, addr string, c contender, admin *redis.Client) (contRun, error)
}

// contRun is one run of a workload.
type contRun struct {
	perSec   float64       // acquisitions (or increments) per second
	cmds     float64       // Redis commands per acquisition, inside scripts included
	procCPU  time.Duration // this process's CPU per acquisition; 0 when not measured
	redisCPU time.Duration // the server's CPU per acquisition
	p99      time.Duration // of a lock call; 0 when not measured
	longest  time.Duration // the longest lock call
	jain     float64       // across the workers; 0 when not measured
	min, max int           // acquisitions of the least and the most served worker
	lost     int           // updates lost (counter)
}

// contRow is one contender in one workload.
type contRow struct {
	workload, name string
	runs           []contRun
}

// contenders of the matrix: ours and the peers with a 1 ms retry, the
// fastest each offers under contention, and our protocol sent bare.
var contMatrixNames = []string{"go-redis-lock", "bsm/redislock 1ms linear", "redsync 1ms retry", bareWaitContender.name}

// bareWaitContender runs go-redis-lock's wire protocol under contention
// straight through go-redis, in the worker's goroutine, with none of the
// library's own work: the acquire script as a first try, then BLPOP with
// the plain SET NX pipelined behind it on a connection of its own, the
// release script, and after a release that handed off (3) a wait before
// the next try, as the library does. What the protocol allows; the gap to
// the library's row is the library's own work (hold, watch, local queue,
// wait lanes and their goroutines).
var bareWaitContender = contender{"go-redis-lock's protocol, bare", func(cc clientCfg, name string) (worker, error) {
	w, err := bareContender.worker(cc, name)
	if err != nil {
		return nil, err
	}
	b := w.(bareWorker)
	// An id of its own (the uncontended floor's is shared), as long.
	id := fmt.Sprintf("bare:%040d", nameSeq.Add(1))
	b.acquire, b.release = slices.Clone(b.acquire), slices.Clone(b.release)
	b.acquire[6], b.release[6] = id, id
	wc := redis.NewClient(&redis.Options{Addr: cc.addr, PoolSize: 1, ContextTimeoutEnabled: !cc.defaults, Dialer: cc.dial})
	return &bareWaitWorker{bareWorker: b, wc: wc, id: id}, nil
}}

type bareWaitWorker struct {
	bareWorker
	wc       *redis.Client // the wait connection
	id       any
	handedOn bool // the last release handed off
}

func (w *bareWaitWorker) lock(ctx context.Context) error {
	for {
		if !w.handedOn {
			r, err := w.c.Do(ctx, w.acquire...).Slice()
			if err != nil {
				return err
			}
			if len(r) == 2 && r[0] == int64(0) {
				return nil
			}
		}
		w.handedOn = false
		pipe := w.wc.Pipeline()
		pipe.Do(ctx, "blpop", w.keys[1], "1")
		set := pipe.Do(ctx, "set", w.keys[0], w.id, "nx", "px", benchTTL.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if set.Err() == nil {
			return nil
		}
		if !errors.Is(set.Err(), redis.Nil) {
			return set.Err()
		}
	}
}

func (w *bareWaitWorker) unlock(ctx context.Context) error {
	n, err := w.c.Do(ctx, w.release...).Int64()
	if err == nil && n != 0 && n != 3 {
		err = fmt.Errorf("bare release %s: %d", w.keys[0], n)
	}
	w.handedOn = n == 3
	return err
}

func (w *bareWaitWorker) close() { w.c.Close(); w.wc.Close() }

func contWorkloads(duration time.Duration, rounds int) []contWorkload {
	fromContention := func(k contention) contRun {
		return contRun{perSec: k.perSec, cmds: k.serverCmds, procCPU: k.procCPU, redisCPU: k.redisCPU, p99: k.waitP99, longest: k.longest, jain: k.jain, min: k.minWorker, max: k.maxWkr}
	}
	return []contWorkload{
		{fmt.Sprintf("counter: 8 workers × %d increments", rounds), func(ctx context.Context, addr string, c contender, admin *redis.Client) (contRun, error) {
			n, err := counter(ctx, addr, c, 8, rounds, admin)
			return contRun{perSec: n.perSec, cmds: n.serverCmds, procCPU: n.procCPU, redisCPU: n.redisCPU, longest: n.longest, lost: n.lost}, err
		}},
		{"contended: 8 workers, no hold", func(ctx context.Context, addr string, c contender, admin *redis.Client) (contRun, error) {
			k, err := contended(ctx, addr, c, 8, duration, 0, admin)
			return fromContention(k), err
		}},
		{"contended: 8 workers, 1 ms hold", func(ctx context.Context, addr string, c contender, admin *redis.Client) (contRun, error) {
			k, err := contended(ctx, addr, c, 8, duration, time.Millisecond, admin)
			return fromContention(k), err
		}},
	}
}

// contentionMatrix runs every workload for every contender of
// contMatrixNames, in rounds: each round runs each contender once per
// workload, in an order rotated each round.
func contentionMatrix(ctx context.Context, addr string, rounds int, duration time.Duration, increments int) ([]*contRow, error) {
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	var cs []contender
	for _, name := range contMatrixNames {
		for _, c := range append(contenders, bareWaitContender) {
			if c.name == name {
				cs = append(cs, c)
			}
		}
	}
	var rows []*contRow
	index := map[string]*contRow{}
	for _, w := range contWorkloads(duration, increments) {
		for _, c := range cs {
			r := &contRow{workload: w.name, name: c.name}
			rows = append(rows, r)
			index[w.name+"/"+c.name] = r
		}
	}
	for round := 0; round < rounds; round++ {
		for _, w := range contWorkloads(duration, increments) {
			for i := range cs {
				c := cs[(i+round)%len(cs)]
				r, err := w.run(ctx, addr, c, admin)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", c.name, w.name, err)
				}
				if r.lost != 0 && c.name == contMatrixNames[0] {
					return nil, fmt.Errorf("%s: %s: %d updates lost: two holders at once", c.name, w.name, r.lost)
				}
				row := index[w.name+"/"+c.name]
				row.runs = append(row.runs, r)
			}
		}
		log.Printf("contention round %d of %d done", round+1, rounds)
	}
	return rows, nil
}

// contTable is the matrix: medians over the rounds, and for each peer the
// median of the per-round ratios of ours to theirs, with its middle half
// (first to third quartile) and the rounds in which ours was at least as
// fast.
func contTable(rows []*contRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| workload | library | per second | ours ÷ this (median; middle half) | rounds ours ≥ | Redis commands / acquisition | process CPU / acq. | Redis CPU / acq. | lock call p99 | longest lock call | Jain | per worker min–max | lost |\n")
	fmt.Fprintf(&b, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	ours := map[string]*contRow{}
	for _, r := range rows {
		if r.name == contMatrixNames[0] {
			ours[r.workload] = r
		}
	}
	for _, r := range rows {
		ratio := "—"
		rounds := "—"
		if o := ours[r.workload]; o != r {
			a, b2 := &uncRow{}, &uncRow{}
			for _, x := range o.runs {
				a.runs = append(a.runs, uncRun{perSec: x.perSec})
			}
			for _, x := range r.runs {
				b2.runs = append(b2.runs, uncRun{perSec: x.perSec})
			}
			m, q1, q3, _, atLeast := pairedSpread(a, b2, func(x uncRun) float64 { return x.perSec })
			ratio = fmt.Sprintf("%.2f (%.2f–%.2f)", m, q1, q3)
			rounds = fmt.Sprintf("%d of %d", atLeast, len(o.runs))
		}
		jain, spread, p99 := "—", "—", "—"
		if medianF(r.runs, func(x contRun) float64 { return x.jain }) > 0 {
			jain = fmt.Sprintf("%.3f", medianF(r.runs, func(x contRun) float64 { return x.jain }))
			spread = fmt.Sprintf("%.0f–%.0f", medianF(r.runs, func(x contRun) float64 { return float64(x.min) }),
				medianF(r.runs, func(x contRun) float64 { return float64(x.max) }))
			p99 = ms(medianD(r.runs, func(x contRun) time.Duration { return x.p99 }))
		}
		lost := 0
		for _, x := range r.runs {
			lost = max(lost, x.lost)
		}
		cpu := func(f func(contRun) time.Duration) string {
			if d := medianD(r.runs, f); d > 0 {
				return fmt.Sprintf("%.0f µs", float64(d)/1e3)
			}
			return "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %d |\n", r.workload, r.name,
			medianF(r.runs, func(x contRun) float64 { return x.perSec }), ratio, rounds,
			medianF(r.runs, func(x contRun) float64 { return x.cmds }),
			cpu(func(x contRun) time.Duration { return x.procCPU }), cpu(func(x contRun) time.Duration { return x.redisCPU }), p99,
			ms(maxD(r.runs, func(x contRun) time.Duration { return x.longest })), jain, spread, lost)
	}
	return b.String()
}

// ms formats d in milliseconds, with two decimals under 10 ms.
func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f ms", float64(d)/1e6)
}

func maxD[T any](rs []T, f func(T) time.Duration) time.Duration {
	var m time.Duration
	for _, r := range rs {
		m = max(m, f(r))
	}
	return m
}
