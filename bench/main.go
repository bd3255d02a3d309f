// Command bench compares go-redis-lock with the Go lock libraries users
// would pick instead, on one redis-server it starts on a free loopback
// port, in one run, and writes RESULTS.md and a chart.
//
//	cd bench && go run .            # full run (a few minutes)
//	cd bench && go run . -quick     # a second or two per workload (CI)
//
// Speed figures are medians over repeats, next to baselines measured in the
// same run (PING round trip; a raw SET NX PX + DEL loop). The run fails only
// on lost updates: a lock that let two holders in.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

type config struct {
	quick    bool
	repeats  int
	duration time.Duration // per contended run
	// The uncontended matrix: rounds of one window per library and client
	// configuration (see uncontendedMatrix).
	uncRounds int
	uncWindow time.Duration
	hold      time.Duration // the waiters workload's hold
	rounds    int           // counter increments per worker
	// The tracking workload: trackLocks locks with expire trackExpire,
	// held for trackRenewals renewals of each.
	trackLocks    int
	trackExpire   time.Duration
	trackRenewals int
	// The mixed-fleet workload (mixed.go): length of each run.
	mixedDuration time.Duration
	onlyMixed     bool // run the mixed-fleet workload alone, print it, write nothing
	// mixedInProcess runs the mixed-fleet workers as goroutines of one
	// process instead of a process each.
	mixedInProcess bool
	onlyCache      bool // run the cache-stampede workload alone, print it, write nothing
	onlyUnc        bool // run the uncontended matrix alone, print it, write nothing
	onlyNoServer   bool // run the no-server table alone, print it, write nothing
	onlyScale      bool // run the scale workloads alone, print them, write nothing
	onlyFamily     bool // run the family workload alone, log it, write nothing
	onlyRW         bool // run the RWMutex workload alone, print it, write nothing
	onlyCont       bool // run the contention matrix alone, print it, write nothing
	contRounds     int  // rounds of the contention matrix
	held, waiters  int  // the many-held workload's sizes
	out            string
	chart          string
}

func main() {
	if spec := os.Getenv(mixedWorkerEnv); spec != "" {
		mixedWorkerMain(spec)
		return
	}
	var cfg config
	flag.BoolVar(&cfg.quick, "quick", false, "one short repeat of each workload, to check that it all works")
	flag.IntVar(&cfg.repeats, "repeats", 3, "repeats of each workload; medians are reported")
	flag.DurationVar(&cfg.duration, "duration", 3*time.Second, "length of each contended run")
	flag.IntVar(&cfg.uncRounds, "unc-rounds", 15, "rounds of the uncontended matrix (each runs every library once); medians are reported")
	flag.DurationVar(&cfg.uncWindow, "unc-window", 300*time.Millisecond, "length of each uncontended window")
	flag.DurationVar(&cfg.mixedDuration, "mixed-duration", 20*time.Second, "length of each mixed-fleet run (Go and Python-style workers on one lock)")
	flag.BoolVar(&cfg.onlyMixed, "only-mixed", false, "run only the mixed-fleet workload and log its figures (RESULTS.md is not written)")
	flag.BoolVar(&cfg.mixedInProcess, "mixed-in-process", false, "run the mixed-fleet workers as goroutines of this process instead of a process each")
	flag.BoolVar(&cfg.onlyCache, "only-cache", false, "run only the cache-stampede workload and log its figures (RESULTS.md is not written)")
	flag.BoolVar(&cfg.onlyUnc, "only-uncontended", false, "run only the uncontended matrix (every library, both client configurations, and defaults on one core) and print it (RESULTS.md is not written)")
	flag.BoolVar(&cfg.onlyNoServer, "only-noserver", false, "run only the no-server table (each go-redis library's cycle against an in-process replier: its own CPU, no kernel, no server) and print it (RESULTS.md is not written)")
	flag.BoolVar(&cfg.onlyRW, "only-rw", false, "run only the RWMutex workload (1 writer + 4 readers, a client each and all on one client) and print it (RESULTS.md is not written)")
	flag.BoolVar(&cfg.onlyFamily, "only-family", false, "run only the family workload (the Semaphore beside the Lock) and log it (RESULTS.md is not written)")
	flag.BoolVar(&cfg.onlyScale, "only-scale", false, "run only the scale workloads (many names; many held locks with waiters) and print them (RESULTS.md is not written)")
	flag.BoolVar(&cfg.onlyCont, "only-contention", false, "run only the contention matrix (counter and contended workloads, ours against bsm/redislock and redsync with a 1 ms retry, in rounds) and print it (RESULTS.md is not written)")
	flag.IntVar(&cfg.contRounds, "cont-rounds", 7, "rounds of the contention matrix (each runs every library once per workload); medians are reported")
	flag.StringVar(&cfg.out, "out", "RESULTS.md", "Markdown report to write")
	flag.StringVar(&cfg.chart, "chart", "chart.svg", "SVG chart to write")
	flag.Parse()
	cfg.hold, cfg.rounds = 2*time.Second, 200
	cfg.trackLocks, cfg.trackExpire, cfg.trackRenewals = 20, 3*time.Second, 10 // a window of ~20 s
	if cfg.quick {
		cfg.repeats, cfg.duration, cfg.hold, cfg.rounds = 1, 300*time.Millisecond, 300*time.Millisecond, 20
		cfg.trackExpire, cfg.trackRenewals = time.Second, 3 // ~2 s
		cfg.mixedDuration = time.Second
		cfg.uncRounds, cfg.uncWindow = 2, 100*time.Millisecond
		cfg.contRounds = 1
	}
	cfg.held, cfg.waiters = 10000, 1000
	if cfg.quick {
		cfg.held, cfg.waiters = 1000, 100
	}
	log.SetFlags(0)
	if err := run(cfg); err != nil {
		log.Fatalf("bench: %v", err)
	}
}

func run(cfg config) error {
	if cfg.onlyNoServer { // no redis-server needed
		rows, err := noServerMatrix(context.Background(), cfg.uncRounds, cfg.uncWindow)
		if err != nil {
			return err
		}
		fmt.Print(noServerTable(rows))
		return nil
	}
	srv, err := startRedis()
	if err != nil {
		return err
	}
	defer srv.stop()
	ctx := context.Background()
	rep := &report{cfg: cfg, started: time.Now(), redisVersion: srv.version}

	log.Printf("redis-server %s on %s; %d repeats (uncontended: %d rounds of %v)", srv.version, srv.addr, cfg.repeats, cfg.uncRounds, cfg.uncWindow)
	if cfg.onlyCache {
		_, err := runCache(ctx, srv.addr, cfg)
		return err
	}
	if cfg.onlyFamily {
		_, err := runFamily(ctx, srv.addr, cfg)
		return err
	}
	if cfg.onlyRW {
		_, err := runRW(ctx, srv.addr, 10*time.Second)
		return err
	}
	if cfg.onlyScale {
		rows, err := runScale(ctx, srv.addr, cfg)
		if err != nil {
			return err
		}
		fmt.Print(scaleTables(rows, cfg))
		return nil
	}
	if cfg.onlyUnc {
		rows, err := uncontendedMatrix(ctx, srv.addr, cfg.uncRounds, cfg.uncWindow)
		if err != nil {
			return err
		}
		fmt.Print(uncTable(rows))
		fmt.Println()
		fmt.Print(pairedTable(rows))
		return nil
	}
	if cfg.onlyCont {
		rows, err := contentionMatrix(ctx, srv.addr, cfg.contRounds, cfg.duration, cfg.rounds)
		if err != nil {
			return err
		}
		fmt.Print(contTable(rows))
		return nil
	}
	if cfg.onlyMixed {
		cases, err := runMixed(ctx, srv.addr, cfg)
		if err != nil {
			return err
		}
		for _, c := range cases {
			if v := c.violations(); v != 0 {
				return fmt.Errorf("mixed %d Go + %d Python, pause %v: %d violations", c.goN, c.pyN, c.pause, v)
			}
		}
		return nil
	}
	for i := 0; i < cfg.repeats; i++ {
		rep.ping = append(rep.ping, pingBaseline(ctx, srv.addr, 2000))
		rep.raw = append(rep.raw, rawBaseline(ctx, srv.addr, cfg.duration))
	}
	log.Printf("baselines: PING p50 %v, raw SET NX PX + DEL %.0f cycles/s", median(rep.ping), medianF(rep.raw, func(r cycles) float64 { return r.perSec }))
	if rep.unc, err = uncontendedMatrix(ctx, srv.addr, cfg.uncRounds, cfg.uncWindow); err != nil {
		return err
	}
	log.Printf("uncontended matrix:\n%s", uncTable(rep.unc))
	if rep.noServer, err = noServerMatrix(ctx, cfg.uncRounds, cfg.uncWindow); err != nil {
		return err
	}
	log.Printf("no-server table:\n%s", noServerTable(rep.noServer))

	admin := redis.NewClient(&redis.Options{Addr: srv.addr})
	defer admin.Close()
	for _, c := range contenders {
		res := &contenderResult{name: c.name, allocs: allocsPerCycle(ctx, srv.addr, c)}
		for i := 0; i < cfg.repeats; i++ {
			k, err := contended(ctx, srv.addr, c, 8, cfg.duration, time.Millisecond, admin)
			if err != nil {
				return fmt.Errorf("%s: contended: %w", c.name, err)
			}
			res.contended = append(res.contended, k)
			w, err := waiters(ctx, srv.addr, c, 32, cfg.hold)
			if err != nil {
				return fmt.Errorf("%s: waiters: %w", c.name, err)
			}
			res.waiters = append(res.waiters, w)
		}
		log.Printf("%-28s contended %6.0f/s  hand-off p50 %8v  waiting cmds %7.0f",
			c.name, medianF(res.contended, func(r contention) float64 { return r.perSec }),
			medianD(res.contended, func(r contention) time.Duration { return r.handoffP50 }),
			medianF(res.waiters, func(r waiting) float64 { return float64(r.commands) }))
		rep.results = append(rep.results, res)
	}
	if rep.cont, err = contentionMatrix(ctx, srv.addr, cfg.contRounds, cfg.duration, cfg.rounds); err != nil {
		return err
	}
	log.Printf("contention matrix:\n%s", contTable(rep.cont))
	for _, on := range []bool{false, true} {
		r, err := renewalCommands(ctx, srv.addr, cfg.trackLocks, cfg.trackExpire, cfg.trackRenewals, on)
		if err != nil {
			return fmt.Errorf("renewals, tracking %v: %w", on, err)
		}
		log.Printf("%d locks renewing every %v, tracking %-5v: %d renewals, %d commands in %v: %.1f commands per lock per minute",
			r.locks, r.every.Round(time.Millisecond), on, r.renewals(), r.total(), r.window.Round(time.Millisecond), r.perLockMinute(r.total()))
		rep.renewals = append(rep.renewals, r)
	}
	if rep.scale, err = runScale(ctx, srv.addr, cfg); err != nil {
		return err
	}
	mixedCases, err := runMixed(ctx, srv.addr, cfg)
	if err != nil {
		return err
	}
	rep.mixed = mixedCases
	if rep.cache, err = runCache(ctx, srv.addr, cfg); err != nil {
		return err
	}
	if rep.family, err = runFamily(ctx, srv.addr, cfg); err != nil {
		return err
	}
	rep.finished = time.Now()
	if err := os.WriteFile(cfg.out, []byte(rep.markdown()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.chart, []byte(rep.svg()), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s and %s", cfg.out, cfg.chart)
	for _, c := range rep.mixed {
		if v := c.violations(); v != 0 {
			return fmt.Errorf("mixed %d Go + %d Python, pause %v: %d acquisitions found another holder inside", c.goN, c.pyN, c.pause, v)
		}
	}
	for _, c := range rep.cache {
		if w := maxWrong(c.runs); w != 0 && strings.HasPrefix(c.name, "go-redis-lock") {
			return fmt.Errorf("%s: %d callers got no value or a wrong one", c.name, w)
		}
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func medianF[T any](rs []T, f func(T) float64) float64 {
	vals := make([]float64, len(rs))
	for i, r := range rs {
		vals[i] = f(r)
	}
	slices.Sort(vals)
	if len(vals) == 0 {
		return 0
	}
	return vals[len(vals)/2]
}

func medianD[T any](rs []T, f func(T) time.Duration) time.Duration {
	vals := make([]time.Duration, len(rs))
	for i, r := range rs {
		vals[i] = f(r)
	}
	return median(vals)
}
