package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The uncontended matrix: one worker's acquire+release loop, for every
// library and the raw SET NX + DEL, in both client configurations, the
// order rotated each repeat so that no library always runs first or last.
// Nothing is hooked into the measured clients: commands are counted on the
// server (INFO commandstats), and CPU is read from both processes (this
// one's getrusage, the server's INFO cpu), so that no library can look fast
// by burning a core.

// uncRun is one measured window.
type uncRun struct {
	perSec     float64
	p50, p99   time.Duration
	serverCmds float64       // commands Redis ran per cycle, those inside scripts included
	scripts    float64       // EVAL/EVALSHA per cycle
	procCPU    time.Duration // this process's user+sys CPU per cycle
	redisCPU   time.Duration // the server's user+sys CPU per cycle
}

// uncRow is one library in one client configuration.
type uncRow struct {
	name, config string
	runs         []uncRun
}

// rawWorker is the hand-written lock: SET NX PX, then DEL.
type rawWorker struct {
	c   *redis.Client
	key string
}

func (w rawWorker) lock(ctx context.Context) error {
	ok, err := w.c.SetNX(ctx, w.key, "x", benchTTL).Result()
	if err == nil && !ok {
		err = fmt.Errorf("raw lock %s busy", w.key)
	}
	return err
}
func (w rawWorker) unlock(ctx context.Context) error { return w.c.Del(ctx, w.key).Err() }
func (w rawWorker) close()                           { w.c.Close() }

// rawContender is the baseline, run as a contender of the matrix.
var rawContender = contender{"raw SET NX + DEL", func(cc clientCfg, name string) (worker, error) {
	return rawWorker{goredisClient(cc), name}, nil
}}

// bareWorker runs go-redis-lock's own acquire and release scripts, as the
// library sends them for a Lock with WithExpire(benchTTL) and the default
// signal expire, straight through go-redis: the cycle's floor for our wire
// protocol (two script round trips), with none of the library's own work
// (hold state, deadline timer, key watch): a floor for the process's CPU
// per cycle, not for its speed (the library's background goroutine can
// keep the cores awake and its cycles faster, at more CPU).
type bareWorker struct {
	c                *redis.Client
	keys             []string
	acquire, release []any
}

func (w bareWorker) lock(ctx context.Context) error {
	r, err := w.c.Do(ctx, w.acquire...).Slice()
	if err == nil && (len(r) != 2 || r[0] != int64(0)) {
		err = fmt.Errorf("bare acquire %s: %v", w.keys[0], r)
	}
	return err
}
func (w bareWorker) unlock(ctx context.Context) error {
	n, err := w.c.Do(ctx, w.release...).Int64()
	if err == nil && n != 0 && n != 3 { // 3: released, handed off to a waiter
		err = fmt.Errorf("bare release %s: %d", w.keys[0], n)
	}
	return err
}
func (w bareWorker) close() { w.c.Close() }

// bareContender is the floor, run as a contender of the matrix. It reads
// the scripts from ../internal/wire/lua (the bench runs in bench/) and loads them.
var bareContender = contender{"go-redis-lock's scripts, bare", func(cc clientCfg, name string) (worker, error) {
	c := goredisClient(cc)
	sha := func(file string) (string, error) {
		src, err := os.ReadFile(filepath.Join("..", "internal", "wire", "lua", file))
		if err != nil {
			return "", err
		}
		return c.ScriptLoad(context.Background(), string(src)).Result()
	}
	acq, err := sha("acquire.lua")
	if err != nil {
		c.Close()
		return nil, err
	}
	rel, err := sha("release.lua")
	if err != nil {
		c.Close()
		return nil, err
	}
	keys := []string{"lock:" + name, "lock-signal:" + name, "lock-signal:" + name + ":turn"}
	id := "bare:" + strings.Repeat("0", 40) // as long as the library's ids (host:pid:uuid)
	return bareWorker{
		c:    c,
		keys: keys,
		// ARGV as the library's first try: id, expire ms, own random id, turn mode 1.
		acquire: []any{"evalsha", acq, "3", keys[0], keys[1], keys[2], id, strconv.FormatInt(benchTTL.Milliseconds(), 10), "1", "1"},
		// ARGV: id, signal expire ms (the default 1 s), turn ms (100).
		release: []any{"evalsha", rel, "3", keys[0], keys[1], keys[2], id, "1000", "100"},
	}, nil
}}

// serverSample is what the server says of itself at one moment.
type serverSample struct {
	calls   map[string]int64 // INFO commandstats calls, by command
	cpu     time.Duration    // used_cpu_user + used_cpu_sys
	infoCnt int64            // our own INFO calls so far (left out)
}

func sampleServer(ctx context.Context, admin *redis.Client) (serverSample, error) {
	s := serverSample{calls: map[string]int64{}}
	stats, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				s.calls[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	cpu, err := admin.Info(ctx, "cpu").Result()
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(cpu, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += time.Duration(f * float64(time.Second))
		}
	}
	return s, nil
}

// commandsSince returns the commands the server ran between a and b, with
// the admin's own INFO calls left out, and how many of them were scripts.
func commandsSince(a, b serverSample) (all, scripts int64) {
	for name, n := range b.calls {
		d := n - a.calls[name]
		switch name {
		case "info":
			continue
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall":
			scripts += d
		}
		all += d
	}
	return all, scripts
}

// processCPU is this process's user+sys CPU so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureUncontended runs w's cycles for d and reads both processes before
// and after.
func measureUncontended(ctx context.Context, admin *redis.Client, w worker, d time.Duration) (uncRun, error) {
	for range 3 { // scripts loaded, connections dialled, outside the measure
		if err := w.lock(ctx); err != nil {
			return uncRun{}, err
		}
		if err := w.unlock(ctx); err != nil {
			return uncRun{}, err
		}
	}
	time.Sleep(50 * time.Millisecond) // let set-up work (a tracker's first read) settle
	s0, err := sampleServer(ctx, admin)
	if err != nil {
		return uncRun{}, err
	}
	cpu0 := processCPU()
	lat := make([]time.Duration, 0, 1<<14)
	start := time.Now()
	for time.Since(start) < d {
		t := time.Now()
		if err := w.lock(ctx); err != nil {
			return uncRun{}, err
		}
		if err := w.unlock(ctx); err != nil {
			return uncRun{}, err
		}
		lat = append(lat, time.Since(t))
	}
	elapsed := time.Since(start)
	cpu1 := processCPU()
	s1, err := sampleServer(ctx, admin)
	if err != nil {
		return uncRun{}, err
	}
	n := float64(len(lat))
	all, scripts := commandsSince(s0, s1)
	return uncRun{
		perSec:     n / elapsed.Seconds(),
		p50:        median(lat),
		p99:        percentile(lat, 0.99),
		serverCmds: float64(all) / n,
		scripts:    float64(scripts) / n,
		procCPU:    time.Duration(float64(cpu1-cpu0) / n),
		redisCPU:   time.Duration(float64(s1.cpu-s0.cpu) / n),
	}, nil
}

// uncontendedMatrix measures every contender (the raw baseline first in
// the list) in both client configurations, in rounds: each round runs
// every contender once, for a window of d, in an order rotated each round.
// This VM's speed drifts by tens of percent over seconds, and the same
// window can run twice as fast as its neighbour a minute later; within a
// round, contenders run seconds apart, so figures from one round compare
// (see pairedTable), where long windows minutes apart do not. Each row's
// runs are its rounds, in order.
func uncontendedMatrix(ctx context.Context, addr string, rounds int, d time.Duration) ([]*uncRow, error) {
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	all := append([]contender{rawContender, bareContender}, contenders...)
	var rows []*uncRow
	index := map[string]*uncRow{}
	for round := 0; round < rounds; round++ {
		for _, cfg := range uncConfigs {
			for i := range all {
				c := all[(i+round)%len(all)]
				cc := cfg
				cc.addr = addr
				key := c.name + "/" + cc.configName()
				row := index[key]
				if row == nil {
					row = &uncRow{name: c.name, config: cc.configName()}
					index[key] = row
				}
				procs := runtime.GOMAXPROCS(0)
				if cc.oneCore {
					runtime.GOMAXPROCS(1) // before the worker starts its goroutines
				}
				w, err := c.worker(cc, uniqueName("uncontended"))
				if err != nil {
					runtime.GOMAXPROCS(procs)
					return nil, fmt.Errorf("%s: %w", key, err)
				}
				r, err := measureUncontended(ctx, admin, w, d)
				w.close()
				runtime.GOMAXPROCS(procs)
				if err != nil {
					return nil, fmt.Errorf("%s: uncontended: %w", key, err)
				}
				row.runs = append(row.runs, r)
			}
		}
		log.Printf("uncontended round %d of %d done", round+1, rounds)
	}
	// Report order: by configuration, then as contenders are listed.
	for _, cfg := range uncConfigs {
		for _, c := range all {
			rows = append(rows, index[c.name+"/"+cfg.configName()])
		}
	}
	return rows, nil
}

// uncConfigs are the matrix's configurations: both client options with
// the machine's cores, and go-redis's defaults on one core.
var uncConfigs = []clientCfg{{defaults: true}, {}, {defaults: true, oneCore: true}}

// pairedRatio is, over the rounds, the median of a's figure over b's, and
// in how many rounds a's was at most b's (lower) or at least (higher).
func pairedRatio(a, b *uncRow, f func(uncRun) float64) (median float64, atMost, atLeast int) {
	median, _, _, atMost, atLeast = pairedSpread(a, b, f)
	return median, atMost, atLeast
}

// pairedSpread is pairedRatio with the quartiles of the per-round ratios
// (nearest rank): half the rounds had a ratio between q1 and q3.
func pairedSpread(a, b *uncRow, f func(uncRun) float64) (median, q1, q3 float64, atMost, atLeast int) {
	var rs []float64
	for i := range min(len(a.runs), len(b.runs)) {
		x, y := f(a.runs[i]), f(b.runs[i])
		if y == 0 {
			continue
		}
		rs = append(rs, x/y)
		if x <= y {
			atMost++
		}
		if x >= y {
			atLeast++
		}
	}
	if len(rs) == 0 {
		return 0, 0, 0, atMost, atLeast
	}
	return quantile(rs, 0.5), quantile(rs, 0.25), quantile(rs, 0.75), atMost, atLeast
}

// quantile is the p-quantile of xs, interpolated between the two nearest
// ranks (so the median of an even count is the mean of the middle two, and
// the quartiles of 15 rounds fall on the 4th and 12th).
func quantile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	h := p * float64(len(s)-1)
	lo := int(math.Floor(h))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (h-float64(lo))*(s[hi]-s[lo])
}

// pairedTable compares go-redis-lock with every other row of its client
// configuration round by round: the median per-round ratio of cycles/s
// and of process CPU per cycle, and the rounds in which ours was at least
// as fast, and at most as costly.
func pairedTable(rows []*uncRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| client options | go-redis-lock against | cycles/s, ours ÷ theirs (median of rounds) | rounds ours ≥ | process CPU / cycle, ours ÷ theirs (median; middle half of rounds) | rounds ours ≤ | Redis CPU / cycle, ours ÷ theirs |\n")
	fmt.Fprintf(&b, "|---|---|---:|---:|---:|---:|---:|\n")
	for _, ours := range rows {
		if ours.name != contenders[0].name {
			continue
		}
		for _, r := range rows {
			if r.config != ours.config || r == ours {
				continue
			}
			speed, _, faster := pairedRatio(ours, r, func(x uncRun) float64 { return x.perSec })
			cpu, q1, q3, cheaper, _ := pairedSpread(ours, r, func(x uncRun) float64 { return float64(x.procCPU) })
			rcpu, _, _ := pairedRatio(ours, r, func(x uncRun) float64 { return float64(x.redisCPU) })
			fmt.Fprintf(&b, "| %s | %s | %.2f | %d of %d | %.2f (%.2f–%.2f) | %d of %d | %.2f |\n",
				ours.config, r.name, speed, faster, len(ours.runs), cpu, q1, q3, cheaper, len(ours.runs), rcpu)
		}
	}
	return b.String()
}

// uncTable is the matrix as a Markdown table: medians over the rounds;
// × raw is the median of the per-round ratios to the raw baseline of the
// same configuration.
func uncTable(rows []*uncRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| library | client options | cycles/s | × raw, same options | p50 | p99 | process CPU / cycle | Redis CPU / cycle | Redis commands / cycle | scripts / cycle |\n")
	fmt.Fprintf(&b, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	raw := map[string]*uncRow{}
	for _, r := range rows {
		if r.name == rawContender.name {
			raw[r.config] = r
		}
	}
	for _, r := range rows {
		ps := medianF(r.runs, func(x uncRun) float64 { return x.perSec })
		ratio, _, _ := pairedRatio(r, raw[r.config], func(x uncRun) float64 { return x.perSec })
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.2f | %s | %s | %.1f µs | %.1f µs | %.2f | %.2f |\n", r.name, r.config, ps, ratio,
			us(medianD(r.runs, func(x uncRun) time.Duration { return x.p50 })),
			us(medianD(r.runs, func(x uncRun) time.Duration { return x.p99 })),
			float64(medianD(r.runs, func(x uncRun) time.Duration { return x.procCPU }))/1e3,
			float64(medianD(r.runs, func(x uncRun) time.Duration { return x.redisCPU }))/1e3,
			medianF(r.runs, func(x uncRun) float64 { return x.serverCmds }),
			medianF(r.runs, func(x uncRun) float64 { return x.scripts }))
	}
	return b.String()
}
