package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
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
//   - acquire: GET lock:<name> first (its check that this Lock does not
//     hold it already, AlreadyAcquired), then loop { SET lock:<name> <id>
//     NX EX <E>; if it failed, BLPOP
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
	b := make([]byte, 18) // python-redis-lock: b64encode(urandom(18))
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	if sent != nil {
		c.AddHook(counting{sent})
	}
	return &pyWorker{
		c:         c,
		id:        base64.StdEncoding.EncodeToString(b),
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
	// acquire() starts with "if self._held", which reads the key.
	switch v, err := w.c.Get(ctx, w.lockKey).Result(); {
	case err != nil && !errors.Is(err, redis.Nil):
		return false, err
	case err == nil && v == w.id:
		return false, errors.New("python-style acquire: AlreadyAcquired")
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
	inProcess   bool // the workers ran as goroutines of one process
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
// release, sleep for pause. Every worker runs in a process of its own (this
// program, started again as a worker: see mixedWorkerMain), as the workers
// of a real fleet do; inProcess runs them as goroutines of this process
// instead. Mutual exclusion is checked from the workers' hold intervals
// (see overlaps).
func mixed(ctx context.Context, addr string, goN, pyN int, d, hold, pause time.Duration, inProcess bool) (mixedRun, error) {
	name := uniqueName("mixed")
	n := goN + pyN
	specs := make([]mixedSpec, n)
	for i := range specs {
		lang := "go"
		if i >= goN {
			lang = "py"
		}
		specs[i] = mixedSpec{Lang: lang, Addr: addr, Name: name, Hold: hold, Pause: pause, D: d}
	}
	var (
		results []mixedResult
		err     error
	)
	if inProcess {
		results, err = mixedGoroutines(ctx, specs)
	} else {
		results, err = mixedProcesses(ctx, specs)
	}
	if err != nil {
		return mixedRun{}, err
	}
	res := mixedRun{hold: hold, pause: pause, d: d, inProcess: inProcess}
	var held [][2]int64
	for _, r := range results {
		held = append(held, r.Held...)
	}
	res.violations, res.maxHolders = overlaps(held)
	fill := func(s *mixedSide, from, to int) {
		s.workers = to - from
		var sent int64
		for _, r := range results[from:to] {
			s.perWorker = append(s.perWorker, r.Acquisitions)
			s.acquisitions += r.Acquisitions
			s.waits = append(s.waits, r.Waits...)
			s.openWait = max(s.openWait, r.Open)
			sent += r.Sent
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
	fill(&res.goSide, 0, goN)
	fill(&res.pySide, goN, n)
	if res.total() == 0 {
		return mixedRun{}, errors.New("no acquisition")
	}
	return res, nil
}

// overlaps counts the holds, of intervals [acquired, released) in Unix
// nanoseconds, that began while another was still on, and the most holds on
// at once (1 when none overlap). Each interval is a worker's critical
// section: from when its acquire returned to just before it sent its
// release, inside the time the lock key held its id. Two that overlap were
// two workers inside at once, which is what the lock must prevent; a key
// taken while another worker was between its release's send and its reply
// is outside every interval and not a violation.
func overlaps(held [][2]int64) (violations, most int64) {
	slices.SortFunc(held, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var ends []int64 // of the holds still on (few: none, when the lock works)
	for _, h := range held {
		on := ends[:0]
		for _, e := range ends {
			if e > h[0] {
				on = append(on, e)
			}
		}
		ends = on
		if len(ends) > 0 {
			violations++
		}
		ends = append(ends, h[1])
		most = max(most, int64(len(ends)))
	}
	return violations, max(most, 1)
}

// mixedSpec is one worker of a mixed run; a worker process gets it as JSON
// in mixedWorkerEnv.
type mixedSpec struct {
	Lang        string // "go" or "py"
	Addr, Name  string
	Hold, Pause time.Duration
	D           time.Duration
}

// mixedResult is what one worker did in its run.
type mixedResult struct {
	Acquisitions int             // completed within the run
	Waits        []time.Duration // of those acquisitions
	Open         time.Duration   // the acquire still waiting when the run ended
	Sent         int64           // commands its client sent in the run
	Held         [][2]int64      // every hold: [acquired, released) in Unix ns
	Err          string          // what stopped it, when not the end of the run
}

// mixedWorkerEnv, when set, makes this program a mixed-run worker (see
// mixedWorkerMain) instead of the bench.
const mixedWorkerEnv = "REDISLOCK_BENCH_MIXED_WORKER"

// mixedWorkerMain runs one worker of a mixed run in this process: it sets
// up (one cycle of the lock, outside the measure), writes "ready", waits
// for a line on stdin, runs for the spec's length and writes its
// mixedResult as JSON.
func mixedWorkerMain(spec string) {
	var s mixedSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		log.Fatalf("mixed worker: %v", err)
	}
	ctx := context.Background()
	var sent atomic.Int64
	w, err := s.worker(&sent)
	if err == nil {
		err = w.warm(ctx)
	}
	if err != nil {
		json.NewEncoder(os.Stdout).Encode(mixedResult{Err: err.Error()})
		return
	}
	defer w.close()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		log.Fatalf("mixed worker: waiting for the start: %v", err)
	}
	sent.Store(0)
	r := runMixedWorker(ctx, w, s, &sent)
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		log.Fatalf("mixed worker: %v", err)
	}
}

// mixedAcq is a worker's lock: go-redis-lock's or the Python-style one.
type mixedAcq interface {
	lock(context.Context) error
	unlock(context.Context) error
	close()
}

// warmAcq is a mixedAcq with its set-up cycle.
type warmAcq struct{ mixedAcq }

// warm loads the scripts and opens the connection outside the measure:
// one cycle of the lock.
func (w warmAcq) warm(ctx context.Context) error {
	if err := w.lock(ctx); err != nil {
		return err
	}
	return w.unlock(ctx)
}

// worker makes the spec's lock, its client counting commands into sent.
func (s mixedSpec) worker(sent *atomic.Int64) (warmAcq, error) {
	if s.Lang == "py" {
		w, err := newPyWorker(s.Addr, s.Name, mixedExpire, sent)
		if err != nil {
			return warmAcq{}, err
		}
		return warmAcq{pyAcq{w}}, nil
	}
	c := goredisClient(withHook(s.Addr, sent))
	l, err := redislock.New(c, s.Name, redislock.WithExpire(mixedExpire))
	if err != nil {
		c.Close()
		return warmAcq{}, err
	}
	return warmAcq{ourWorker{l, c}}, nil
}

// runMixedWorker is one worker's loop, from now for s.D.
func runMixedWorker(ctx context.Context, w mixedAcq, s mixedSpec, sent *atomic.Int64) mixedResult {
	var r mixedResult
	runCtx, cancel := context.WithTimeout(ctx, s.D)
	defer cancel()
	deadline, _ := runCtx.Deadline()
	for runCtx.Err() == nil {
		start := time.Now()
		if err := w.lock(runCtx); err != nil {
			if runCtx.Err() == nil {
				r.Err = err.Error()
			} else {
				r.Open = time.Since(start)
			}
			break
		}
		acquired := time.Now()
		if acquired.Before(deadline) {
			r.Acquisitions++
			r.Waits = append(r.Waits, acquired.Sub(start))
		}
		time.Sleep(s.Hold)
		released := time.Now()
		r.Held = append(r.Held, [2]int64{acquired.UnixNano(), released.UnixNano()})
		if err := w.unlock(context.WithoutCancel(ctx)); err != nil {
			r.Err = err.Error()
			break
		}
		if s.Pause > 0 {
			time.Sleep(s.Pause)
		}
	}
	r.Sent = sent.Load()
	return r
}

// mixedGoroutines runs the workers as goroutines of this process.
func mixedGoroutines(ctx context.Context, specs []mixedSpec) ([]mixedResult, error) {
	ws := make([]warmAcq, len(specs))
	sent := make([]atomic.Int64, len(specs))
	for i, s := range specs {
		w, err := s.worker(&sent[i])
		if err != nil {
			return nil, err
		}
		defer w.close()
		ws[i] = w
	}
	// One worker at a time, as each worker process does it.
	for _, w := range ws {
		if err := w.warm(ctx); err != nil {
			return nil, err
		}
	}
	results := make([]mixedResult, len(specs))
	var wg sync.WaitGroup
	for i, w := range ws {
		sent[i].Store(0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runMixedWorker(ctx, w, specs[i], &sent[i])
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	wakePython(ctx, specs, done)
	return results, mixedErr(results)
}

// mixedProcesses runs each worker in a process of its own: this program,
// started again with mixedWorkerEnv set.
func mixedProcesses(ctx context.Context, specs []mixedSpec) ([]mixedResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	type proc struct {
		cmd    *exec.Cmd
		in     io.WriteCloser
		out    *bufio.Reader
		stderr strings.Builder
	}
	procs := make([]*proc, len(specs))
	defer func() {
		for _, p := range procs {
			if p != nil && p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	}()
	for i, s := range specs {
		spec, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		p := &proc{cmd: exec.Command(exe)}
		p.cmd.Env = append(os.Environ(), mixedWorkerEnv+"="+string(spec))
		p.cmd.Stderr = &p.stderr
		if p.in, err = p.cmd.StdinPipe(); err != nil {
			return nil, err
		}
		out, err := p.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		p.out = bufio.NewReader(out)
		if err := p.cmd.Start(); err != nil {
			return nil, err
		}
		procs[i] = p
	}
	failed := func(i int, err error) error {
		return fmt.Errorf("mixed worker %d (%s): %w; stderr: %s", i, specs[i].Lang, err, strings.TrimSpace(procs[i].stderr.String()))
	}
	for i, p := range procs {
		line, err := p.out.ReadString('\n')
		if err != nil {
			return nil, failed(i, err)
		}
		if line != "ready\n" {
			var r mixedResult
			if json.Unmarshal([]byte(line), &r) == nil && r.Err != "" {
				return nil, failed(i, errors.New(r.Err))
			}
			return nil, failed(i, fmt.Errorf("unexpected %q", line))
		}
	}
	for i, p := range procs {
		if _, err := io.WriteString(p.in, "go\n"); err != nil {
			return nil, failed(i, err)
		}
	}
	results := make([]mixedResult, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := json.NewDecoder(p.out).Decode(&results[i]); err != nil {
				errs[i] = failed(i, err)
			}
			if err := p.cmd.Wait(); err != nil && errs[i] == nil {
				errs[i] = failed(i, err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	wakePython(ctx, specs, done)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return results, mixedErr(results)
}

// wakePython waits until done, once the run's length has passed pushing a
// signal every 20 ms when there are Python-style workers: they sit in
// BLPOP for up to the expire and do not watch the run's end. (Go workers
// return at the end of the run.)
func wakePython(ctx context.Context, specs []mixedSpec, done <-chan struct{}) {
	py := slices.IndexFunc(specs, func(s mixedSpec) bool { return s.Lang == "py" })
	if py < 0 {
		<-done
		return
	}
	select {
	case <-done:
		return
	case <-time.After(specs[py].D):
	}
	waker := redis.NewClient(&redis.Options{Addr: specs[py].Addr})
	defer waker.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		waker.LPush(context.WithoutCancel(ctx), "lock-signal:"+specs[py].Name, 1)
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// mixedErr is the first worker error of a run.
func mixedErr(results []mixedResult) error {
	for i, r := range results {
		if r.Err != "" {
			return fmt.Errorf("mixed worker %d: %s", i, r.Err)
		}
	}
	return nil
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
			r, err := mixed(ctx, addr, c.goN, c.pyN, cfg.mixedDuration, c.hold, c.pause, cfg.mixedInProcess)
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
