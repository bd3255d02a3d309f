package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// The mixed-fleet workload: Go workers using go-redis-lock and Python-style
// workers speaking python-redis-lock 4.x's protocol take turns on one lock
// name, and the run reports how the turns were shared and how long each
// side waited for them.

const (
	mixedExpire = 10 * time.Second // both sides' expire
	// pySignalExpireMS is python-redis-lock's default signal_expire.
	pySignalExpireMS = 1000
	// longWait is the wait beyond which an acquire is counted as long.
	longWait = 2 * time.Second
)

// pyWorker is one python-redis-lock 4.x Lock(redis, name, expire=E), with
// its own client (default options, as redis.StrictRedis() would have),
// driven from Go with raw commands:
//
//   - acquire: loop { SET lock:<name> <id> NX EX <E>; if it failed, BLPOP
//     lock-signal:<name> <timeout or E or 0> } -- a waiter woken by the
//     signal makes a second round trip, the next SET NX, to take the lock;
//   - release: one script that checks the owner and, if it is us, deletes
//     the signal list, pushes one signal, sets its expire and deletes the
//     lock key.
type pyWorker struct {
	c         *redis.Client
	id        string
	lockKey   string
	signalKey string
	expire    int64 // seconds: python-redis-lock truncates expire to int; 0 is None
}

// pyRelease is python-redis-lock's unlock script, in effect: KEYS = {lock,
// signal}, ARGV = {id, signal expire in ms}; 1 when the lock is not ours.
var pyRelease = redis.NewScript(`
if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 1
end
redis.call("del", KEYS[2])
redis.call("lpush", KEYS[2], 1)
redis.call("pexpire", KEYS[2], ARGV[2])
redis.call("del", KEYS[1])
return 0
`)

var errPyNotAcquired = errors.New("python-style release: lock not held by this id (NotAcquired)")

// newPyWorker returns a Python-style worker on lock name; the commands its
// client sends are added to sent.
func newPyWorker(addr, name string, expire time.Duration, sent *atomic.Int64) (*pyWorker, error) {
	b := make([]byte, 18) // python-redis-lock: urlsafe_b64encode(urandom(18))
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	if sent != nil {
		c.AddHook(counting{sent})
	}
	return &pyWorker{
		c:         c,
		id:        base64.URLEncoding.EncodeToString(b),
		lockKey:   "lock:" + name,
		signalKey: "lock-signal:" + name,
		expire:    int64(expire / time.Second),
	}, nil
}

// acquire is acquire(blocking=True, timeout=None): it returns when the lock
// is held, or with ctx's error when ctx ended (a stop for the harness;
// python-redis-lock has none).
func (w *pyWorker) acquire(ctx context.Context) error {
	ok, err := w.try(ctx, true, 0)
	if err == nil && !ok {
		err = errors.New("python-style acquire without timeout returned False")
	}
	return err
}

// try is acquire(blocking, timeout), timeout 0 being None; timeout is
// truncated to whole seconds as python-redis-lock does. As there, a BLPOP
// that times out when a timeout was given is followed by one more SET NX
// before False.
func (w *pyWorker) try(ctx context.Context, blocking bool, timeout time.Duration) (bool, error) {
	t := int64(timeout / time.Second)
	blpopTimeout := t
	if blpopTimeout == 0 {
		blpopTimeout = w.expire // and 0 (forever) when expire is None
	}
	timedOut := false
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		args := []any{"set", w.lockKey, w.id, "nx"}
		if w.expire > 0 {
			args = append(args, "ex", w.expire)
		}
		err := w.c.Do(ctx, args...).Err()
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, redis.Nil) {
			return false, err
		}
		if timedOut || !blocking {
			return false, nil
		}
		// BLPop, not Do: go-redis gives a blocking command a read deadline
		// past its timeout (none for 0), where Do would use ReadTimeout.
		_, err = w.c.BLPop(ctx, time.Duration(blpopTimeout)*time.Second, w.signalKey).Result()
		switch {
		case errors.Is(err, redis.Nil):
			timedOut = t > 0
		case err != nil:
			return false, err
		}
	}
}

// release is release(): errPyNotAcquired when the lock is no longer ours.
func (w *pyWorker) release(ctx context.Context) error {
	n, err := pyRelease.Run(ctx, w.c, []string{w.lockKey, w.signalKey}, w.id, pySignalExpireMS).Int()
	if err != nil {
		return err
	}
	if n == 1 {
		return errPyNotAcquired
	}
	return nil
}

func (w *pyWorker) close() { w.c.Close() }

// mixedSide is one language's figures in a mixed run.
type mixedSide struct {
	workers      int
	acquisitions int   // completed within the run
	perWorker    []int // acquisitions of each worker
	waits        []time.Duration
	longWaits    int           // waits beyond longWait
	openWait     time.Duration // longest acquire still waiting when the run ended
	commands     float64       // sent per acquisition
}

func (s mixedSide) p50() time.Duration { return percentile(s.waits, 0.5) }
func (s mixedSide) p99() time.Duration { return percentile(s.waits, 0.99) }
func (s mixedSide) max() time.Duration {
	if len(s.waits) == 0 {
		return 0
	}
	return slices.Max(s.waits)
}

// minMaxShare is the smallest and largest per-worker share, in % of all
// acquisitions of the run (both languages).
func (s mixedSide) minMaxShare(total int) (float64, float64) {
	if len(s.perWorker) == 0 || total == 0 {
		return 0, 0
	}
	return 100 * float64(slices.Min(s.perWorker)) / float64(total), 100 * float64(slices.Max(s.perWorker)) / float64(total)
}

// mixedRun is one run of the mixed workload.
type mixedRun struct {
	hold, pause time.Duration
	d           time.Duration
	goSide      mixedSide
	pySide      mixedSide
	violations  int64 // acquisitions that found another holder inside
	maxHolders  int64
}

func (r mixedRun) total() int { return r.goSide.acquisitions + r.pySide.acquisitions }

// share is side's share of all acquisitions, in %.
func (r mixedRun) share(s mixedSide) float64 {
	if r.total() == 0 {
		return 0
	}
	return 100 * float64(s.acquisitions) / float64(r.total())
}

func (r mixedRun) label() string {
	if r.pySide.workers == 0 {
		return fmt.Sprintf("%d Go, %v hold, pause %v", r.goSide.workers, r.hold, r.pause)
	}
	return fmt.Sprintf("%d Go + %d Python, %v hold, pause %v", r.goSide.workers, r.pySide.workers, r.hold, r.pause)
}

// summary is the run's log line.
func (r mixedRun) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mixed %-30s %6d acquisitions", r.label(), r.total())
	side := func(lang string, s mixedSide) {
		lo, hi := s.minMaxShare(r.total())
		fmt.Fprintf(&b, "  %s %5.1f%% (per worker %.1f–%.1f%%) wait p50/p99/max %s/%s/%s >%v: %d",
			lang, r.share(s), lo, hi, short(s.p50()), short(s.p99()), short(s.max()), longWait, s.longWaits)
	}
	side("Go", r.goSide)
	if r.pySide.workers > 0 {
		side("Python", r.pySide)
	}
	fmt.Fprintf(&b, "  violations %d", r.violations)
	return b.String()
}

// short formats a wait in the unit that suits it.
func short(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// mixed runs goN Go workers (go-redis-lock) and pyN Python-style workers
// on one lock name for d. Each loops: acquire (blocking), hold for hold,
// release, sleep for pause. An in-process holders counter, raised after
// each acquire and lowered before each release, checks mutual exclusion.
func mixed(ctx context.Context, addr string, goN, pyN int, d, hold, pause time.Duration) (mixedRun, error) {
	name := uniqueName("mixed")
	var goSent, pySent atomic.Int64
	type acq interface {
		lock(context.Context) error
		unlock(context.Context) error
		close()
	}
	workers := make([]acq, 0, goN+pyN)
	for i := 0; i < goN; i++ {
		c := goredisClient(withHook(addr, &goSent))
		l, err := redislock.New(c, name, redislock.WithExpire(mixedExpire))
		if err != nil {
			c.Close()
			return mixedRun{}, err
		}
		w := ourWorker{l, c}
		defer w.close()
		workers = append(workers, w)
	}
	pys := make([]*pyWorker, 0, pyN)
	for i := 0; i < pyN; i++ {
		w, err := newPyWorker(addr, name, mixedExpire, &pySent)
		if err != nil {
			return mixedRun{}, err
		}
		defer w.close()
		pys = append(pys, w)
		workers = append(workers, pyAcq{w})
	}
	// Load the scripts and open the connections outside the measure: one
	// cycle each, one worker at a time.
	for _, w := range workers {
		if err := w.lock(ctx); err != nil {
			return mixedRun{}, err
		}
		if err := w.unlock(ctx); err != nil {
			return mixedRun{}, err
		}
	}
	goSent.Store(0)
	pySent.Store(0)

	var (
		holders, maxHolders, violations atomic.Int64
		wg                              sync.WaitGroup
		failed                          firstError
	)
	n := len(workers)
	per := make([]int, n)
	waits := make([][]time.Duration, n)
	open := make([]time.Duration, n)
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	deadline, _ := runCtx.Deadline()
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				start := time.Now()
				if err := w.lock(runCtx); err != nil {
					if runCtx.Err() == nil {
						failed.set(err)
					} else {
						open[i] = max(open[i], time.Since(start))
					}
					return
				}
				acquired := time.Now()
				if h := holders.Add(1); h > 1 {
					violations.Add(1)
					for m := maxHolders.Load(); h > m && !maxHolders.CompareAndSwap(m, h); m = maxHolders.Load() {
					}
				}
				if acquired.Before(deadline) {
					per[i]++
					waits[i] = append(waits[i], acquired.Sub(start))
				}
				time.Sleep(hold)
				holders.Add(-1)
				if err := w.unlock(context.WithoutCancel(ctx)); err != nil {
					failed.set(err)
					return
				}
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	// Python-style waiters sit in BLPOP for up to the expire and do not
	// watch ctx: once the run is over, push signals until they have all
	// come out. (Go workers return on ctx.)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	<-runCtx.Done()
	if pyN > 0 {
		waker := redis.NewClient(&redis.Options{Addr: addr})
		defer waker.Close()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
	wake:
		for {
			waker.LPush(context.WithoutCancel(ctx), pys[0].signalKey, 1)
			select {
			case <-done:
				break wake
			case <-tick.C:
			}
		}
	}
	<-done
	if err := failed.get(); err != nil {
		return mixedRun{}, err
	}
	res := mixedRun{hold: hold, pause: pause, d: d, violations: violations.Load(), maxHolders: max(1, maxHolders.Load())}
	fill := func(s *mixedSide, from, to int, sent int64) {
		s.workers = to - from
		for i := from; i < to; i++ {
			s.perWorker = append(s.perWorker, per[i])
			s.acquisitions += per[i]
			s.waits = append(s.waits, waits[i]...)
			s.openWait = max(s.openWait, open[i])
		}
		for _, w := range s.waits {
			if w > longWait {
				s.longWaits++
			}
		}
		if s.acquisitions > 0 {
			s.commands = float64(sent) / float64(s.acquisitions)
		}
	}
	fill(&res.goSide, 0, goN, goSent.Load())
	fill(&res.pySide, goN, n, pySent.Load())
	if res.total() == 0 {
		return mixedRun{}, errors.New("no acquisition")
	}
	return res, nil
}

// pyAcq adapts a pyWorker to the loop's interface.
type pyAcq struct{ w *pyWorker }

func (a pyAcq) lock(ctx context.Context) error   { return a.w.acquire(ctx) }
func (a pyAcq) unlock(ctx context.Context) error { return a.w.release(ctx) }
func (a pyAcq) close()                           { a.w.close() }

// mixedCase is one configuration of the mixed workload and its repeats.
type mixedCase struct {
	goN, pyN    int
	hold, pause time.Duration
	runs        []mixedRun
}

// mixedCases are the configurations the bench runs: the mixed fleet with
// and without a pause between turns, and a Go-only fleet for fairness.
func mixedCases() []*mixedCase {
	return []*mixedCase{
		{goN: 4, pyN: 4, hold: time.Millisecond, pause: 0},
		{goN: 4, pyN: 4, hold: time.Millisecond, pause: time.Millisecond},
		{goN: 8, pyN: 0, hold: time.Millisecond, pause: 0},
	}
}

// runMixed runs every case cfg.repeats times, interleaved, logging a line
// per run.
func runMixed(ctx context.Context, addr string, cfg config) ([]*mixedCase, error) {
	cases := mixedCases()
	for i := 0; i < cfg.repeats; i++ {
		for _, c := range cases {
			r, err := mixed(ctx, addr, c.goN, c.pyN, cfg.mixedDuration, c.hold, c.pause)
			if err != nil {
				return cases, fmt.Errorf("mixed %d Go + %d Python, pause %v: %w", c.goN, c.pyN, c.pause, err)
			}
			log.Print(r.summary())
			c.runs = append(c.runs, r)
		}
	}
	return cases, nil
}

func (c *mixedCase) violations() int64 {
	var n int64
	for _, r := range c.runs {
		n += r.violations
	}
	return n
}
