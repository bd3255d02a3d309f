package redislock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// Worker processes: the test binary re-executed with workerEnv set to a
// mode, and its parameters in environment variables.
const workerEnv = "REDISLOCK_TEST_WORKER"

// runWorker is the worker's main; it returns the exit code.
func runWorker(mode string) int {
	addr, name := os.Getenv("W_ADDR"), os.Getenv("W_NAME")
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "worker:", err); return 1 }
	switch mode {
	case "counter": // W_ROUNDS critical sections, W_LOCKED=0 for none
		rounds, _ := strconv.Atoi(os.Getenv("W_ROUNDS"))
		locked := os.Getenv("W_LOCKED") != "0"
		l, err := redislock.New(c, name, redislock.WithExpire(30*time.Second))
		if err != nil {
			return fail(err)
		}
		for i := 0; i < rounds; i++ {
			if locked {
				if err := l.Acquire(ctx); err != nil {
					return fail(err)
				}
			}
			n, err := c.Get(ctx, name+":count").Int()
			if err != nil && !errors.Is(err, redis.Nil) {
				return fail(err)
			}
			if err := c.Set(ctx, name+":count", n+1, 0).Err(); err != nil {
				return fail(err)
			}
			if locked {
				if err := l.Release(ctx); err != nil {
					return fail(err)
				}
			}
		}
		return 0
	case "hold": // acquire (W_EXPIRE, W_RENEW=1), say "held", wait for the loss, release (W_RELEASE=del: with a plain DEL)
		expire, _ := time.ParseDuration(os.Getenv("W_EXPIRE"))
		opts := []redislock.Option{redislock.WithExpire(expire)}
		if os.Getenv("W_RENEW") == "1" {
			opts = append(opts, redislock.WithAutoRenewal())
		}
		l, err := redislock.New(c, name, opts...)
		if err != nil {
			return fail(err)
		}
		if err := l.Acquire(ctx); err != nil {
			return fail(err)
		}
		fmt.Println("held")
		<-l.Done()
		fmt.Printf("lost: %v\n", l.Err())
		if os.Getenv("W_RELEASE") == "del" { // the broken variant: no id check
			fmt.Printf("release: %v\n", c.Del(ctx, l.Key()).Err())
			return 0
		}
		fmt.Printf("release: %v\n", l.Release(ctx))
		return 0
	case "ids": // print the ids of W_COUNT new Locks (W_SEEDED=1: ids from math/rand seeded with 1)
		n, _ := strconv.Atoi(os.Getenv("W_COUNT"))
		seeded := mrand.New(mrand.NewSource(1))
		for i := 0; i < n; i++ {
			var opts []redislock.Option
			if os.Getenv("W_SEEDED") == "1" { // the broken variant
				// The default's form, with a random part that is not.
				opts = append(opts, redislock.WithID(fmt.Sprintf("host:%d:%s", os.Getpid(), uuid.Must(uuid.NewRandomFromReader(seeded)))))
			}
			l, err := redislock.New(c, "job", opts...)
			if err != nil {
				return fail(err)
			}
			fmt.Println(l.ID())
		}
		return 0
	}
	if code, ok := runFamilyWorker(mode, c, name); ok {
		return code
	}
	return fail(fmt.Errorf("unknown mode %q", mode))
}

// worker starts the test binary as a worker process.
func worker(t *testing.T, mode string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{workerEnv + "=" + mode}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// startHolder starts a "hold" worker and waits until it holds the lock. It
// returns the process and its remaining output.
func startHolder(t *testing.T, addr, name, expire string, renew bool, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	r := "0"
	if renew {
		r = "1"
	}
	return startHeld(t, worker(t, "hold", append([]string{"W_ADDR=" + addr, "W_NAME=" + name, "W_EXPIRE=" + expire, "W_RENEW=" + r}, env...)...))
}

// startHeld starts a worker that says "held" once it holds, waits for
// that, and returns the process and its remaining output.
func startHeld(t *testing.T, cmd *exec.Cmd) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	br := redistest.StartProcess(t, cmd)
	if line, err := br.ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("holder process said %q, %v", line, err)
	}
	return cmd, br
}

// Sixteen processes × 500 critical sections on one lock, a non-atomic
// counter inside: exactly 8000. Without the lock (the broken variant) the
// same processes lose updates.
func TestMultiProcessMutualExclusion(t *testing.T) {
	t.Parallel()
	procs, rounds := 16, 500
	if testing.Short() {
		procs, rounds = 4, 50
	}
	for _, locked := range []bool{true, false} {
		name := "locked"
		if !locked {
			name = "broken/unlocked"
		}
		t.Run(name, func(t *testing.T) {
			s := redistest.Start(t)
			l := "1"
			if !locked {
				l = "0"
			}
			var cmds []*exec.Cmd
			start := time.Now()
			for i := 0; i < procs; i++ {
				cmd := worker(t, "counter", "W_ADDR="+s.Addr, "W_NAME=job", "W_ROUNDS="+strconv.Itoa(rounds), "W_LOCKED="+l)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds = append(cmds, cmd)
			}
			for _, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("worker: %v", err)
				}
			}
			got, _ := s.Client().Get(context.Background(), "job:count").Int()
			want := procs * rounds
			t.Logf("%d processes × %d: counter %d of %d in %v", procs, rounds, got, want, time.Since(start))
			if (got == want) != locked {
				t.Fatalf("counter = %d of %d; want no lost update = %v", got, want, locked)
			}
		})
	}
}

// A holder process SIGKILLed while holding a 1 s lock: the next waiter
// acquires within the TTL + 1 s. In the broken variant the holder's
// key has no expire, and the same check finds the waiter still waiting.
func TestHolderKilled(t *testing.T) {
	t.Parallel()
	long(t, "kills a holder process")
	for _, tc := range killCases("broken/no expire", "0s") {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			holder, _ := startHolder(t, s.Addr, "job", tc.expire, false)
			held := time.Now() // the holder acquired before this
			holder.Process.Signal(syscall.SIGKILL)
			holder.Wait()
			waiter := mustNew(t, s.Client(), "job")
			wctx, cancel := context.WithTimeout(ctx, killedTTL+killedSlack+time.Second)
			defer cancel()
			killedHolderFreed(t, "the waiter's Acquire()", waiter.Acquire(wctx), held, tc.wantFreed)
		})
	}
}

// A holder process SIGSTOPped past its TTL, with auto-renewal: another
// client acquires; when the holder resumes, its Done has fired and its
// Release returns ErrNotAcquired, and the new owner's key is untouched. In
// the broken variant the resumed holder releases with a plain DEL, and the
// same check finds the new owner's key gone.
func TestHolderPausedPastTTL(t *testing.T) {
	quick(t)
	long(t, "pauses a holder process")
	for _, tc := range []struct {
		name    string
		release string
		broken  bool
	}{
		{"release", "", false},
		{"broken/release without id check", "del", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, admin := started(t)
			holder, out := startHolder(t, s.Addr, "job", "500ms", true, "W_RELEASE="+tc.release)
			holder.Process.Signal(syscall.SIGSTOP)
			paused := time.Now()

			next := mustNew(t, s.Client(), "job", redislock.WithExpire(30*time.Second))
			mustAcquire(t, ctx, next)
			t.Logf("holder paused; the next client acquired after %v (holder TTL 500ms)", time.Since(paused))
			report := resumedAfterLoss(t, holder, out)
			if !tc.broken && (!strings.Contains(report, "release: ") || !strings.Contains(report, "not held by this owner")) {
				t.Fatalf("holder's Release after the loss: %q, want ErrNotAcquired", report)
			}
			got, ttl := admin.Get(ctx, "lock:job").Val(), admin.PTTL(ctx, "lock:job").Val()
			if untouched := got == next.ID() && ttl >= 20*time.Second; untouched == tc.broken {
				t.Fatalf("new owner's key after the paused holder resumed: %q, PTTL %v; want untouched = %v", got, ttl, !tc.broken)
			}
		})
	}
}

// resumedAfterLoss resumes a holder process paused past its TTL and
// returns what it reported after, which must tell of its loss.
func resumedAfterLoss(t *testing.T, holder *exec.Cmd, out io.Reader) string {
	t.Helper()
	holder.Process.Signal(syscall.SIGCONT)
	rest, _ := io.ReadAll(out)
	holder.Wait()
	report := string(rest)
	t.Logf("holder after resuming: %q", report)
	if !strings.Contains(report, "lost: ") || !strings.Contains(report, "lock lost") {
		t.Fatalf("holder did not see its loss: %q", report)
	}
	return report
}

// noEvalHook makes a client that cannot load scripts: EVAL is refused as
// if the script were missing, so only what the server already cached runs
// (the restart test's broken variant: a waiter that never reloads).
type noEvalHook struct{}

func (noEvalHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (noEvalHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "eval") {
			err := errors.New("NOSCRIPT refused by the test: this client does not load scripts")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (noEvalHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Redis SIGKILLed and restarted (empty: no lock, no cached script) while 8
// waiters block: every waiter gets the lock (and releases it), the last
// within restart + TTL + 1 s. go-redis retries the pipelines that the kill
// broke, and the waiters' tries that then meet NOSCRIPT are sent again
// with EVAL. (A waiter whose client runs out of retries before the server
// is back gets the connection error, as the design allows; the test gives
// its clients enough retries to span a slow restart.) In the broken variant the waiters cannot load scripts, and
// the check that they all get the lock fails.
func TestRedisRestartWithWaiters(t *testing.T) {
	quick(t)
	const ttl, waiters = time.Second, 8
	andBroken(t, "reloading", "no EVAL", func(t *testing.T, broken bool) {
		s, ctx, _ := started(t)
		mustAcquire(t, ctx, mustNew(t, s.Client(), "job", redislock.WithExpire(ttl)))
		admin := s.Client()
		var wg sync.WaitGroup
		type result struct {
			err error
			at  time.Time
		}
		results := make(chan result, waiters)
		for i := 0; i < waiters; i++ {
			// Enough retries to span the restart on a loaded machine
			// (go-redis's default 3 give up after 30 to 170 ms), with
			// their backoff capped at 100 ms (some 0.6 s for the 10):
			// a waiter's try, sent as its BLPOP's connection drops, may
			// connect in the instant the killed server still accepts,
			// and go-redis v9.23 retries the handshake on that dead
			// connection as often as MaxRetries says. With the default
			// cap (512 ms) that alone took 3.8-4.6 s, once in some 15
			// runs on a loaded machine.
			c := s.Client(func(o *redis.Options) {
				o.MaxRetries = 10
				o.MaxRetryBackoff = 100 * time.Millisecond
			})
			if broken {
				c.AddHook(noEvalHook{})
			}
			l := mustNew(t, c, "job")
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				err := l.Acquire(wctx)
				if err == nil {
					err = l.Release(ctx)
				}
				results <- result{err, time.Now()}
			}()
		}
		waitBlocked(t, admin, waiters)
		s.Kill()
		s.Restart()
		restarted := time.Now()
		wg.Wait()
		close(results)
		var last time.Time
		var errs []error
		for r := range results {
			if r.at.After(last) {
				last = r.at
			}
			if r.err != nil {
				errs = append(errs, r.err)
			}
		}
		t.Logf("Redis restarted; %d of %d waiters got the lock, the last returned %v later; errors: %v",
			waiters-len(errs), waiters, last.Sub(restarted), errs)
		if all := len(errs) == 0; all == broken {
			t.Fatalf("%d of %d waiters got the lock after the restart, want all = %v", waiters-len(errs), waiters, !broken)
		}
		// The bound is the working variant's: a waiter in the broken one
		// fails at its first try, or, when that try meets the server
		// still restarting, when its client gives up dialing (go-redis
		// v9.23 took 2.9 s once, under load).
		if !broken && last.Sub(restarted) > ttl+time.Second {
			t.Fatalf("last waiter returned %v after the restart, want within TTL + 1s", last.Sub(restarted))
		}
	})
}

// The try a waiter sends after its BLPOP's connection drops gets all the
// time the caller gives: here its client takes 4.5 s to answer it (a
// restart that outlasts the dial retries, say) and the waiter, with 20 s
// to go, gets the lock. It was run on a context of its own that ended a
// slice plus cleanupTimeout after the wait began (at most 4 s): Acquire
// failed with "context deadline exceeded" long before the caller's
// deadline (CI: 3 of 8 waiters through a restart with go-redis v9.23).
func TestTryAfterALostWaitHasTheCallersTime(t *testing.T) {
	t.Parallel()
	long(t, "restarts the server under waiters")
	s, ctx, admin := started(t)
	// Held by another owner until the test releases it.
	if err := admin.Set(ctx, "lock:job", "other-owner", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	slow := &slowTryHook{delay: 4500 * time.Millisecond}
	c := s.Client()
	c.AddHook(slow)
	w := mustNew(t, c, "job")
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got := acquireAsync(wctx, w)
	within(t, 10*time.Second, "the waiter blocks in BLPOP", func() bool {
		k, _ := waitingConns(t, admin)
		return k == 1
	})
	// From now on the waiter's client is slow to answer a script; then
	// its BLPOP's connection drops and the lock is released.
	slow.armed.Store(true)
	if err := admin.ClientKillByFilter(ctx, "TYPE", "normal").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Del(ctx, "lock:job").Err(); err != nil {
		t.Fatal(err)
	}
	r := receive(t, got)
	if r.err != nil {
		t.Fatalf("Acquire() = %v, want the lock: the caller gave 20 s and the try took %v", r.err, slow.delay)
	}
	if slow.delayed.Load() == 0 {
		t.Fatal("no try was delayed: the test did not reach its case")
	}
	if owner := admin.Get(ctx, "lock:job").Val(); owner != w.ID() {
		t.Fatalf("lock:job = %q, want the waiter's id", owner)
	}
}

// slowTryHook delays, once armed, every script a client sends by delay
// (or until its context ends).
type slowTryHook struct {
	delay   time.Duration
	armed   atomic.Bool
	delayed atomic.Int32
}

func (*slowTryHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slowTryHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := strings.ToLower(cmd.Name()); h.armed.Load() && (name == "evalsha" || name == "eval") {
			h.delayed.Add(1)
			select {
			case <-time.After(h.delay):
			case <-ctx.Done():
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}
func (*slowTryHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Redis killed and not restarted: every blocked Acquire returns an error
// within 5 s.
func TestRedisKilledWaitersFail(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	mustAcquire(t, ctx, mustNew(t, s.Client(), "job"))
	admin := s.Client()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		l := mustNew(t, s.Client(), "job")
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- l.Acquire(ctx)
		}()
	}
	waitBlocked(t, admin, 8)
	killed := time.Now()
	s.Kill()
	wg.Wait()
	took := time.Since(killed)
	close(errs)
	for err := range errs {
		if err == nil {
			t.Fatal("an Acquire succeeded with Redis dead")
		}
	}
	t.Logf("Redis killed; all 8 blocked Acquires returned errors within %v", took)
	if took > 5*time.Second {
		t.Fatalf("blocked Acquires returned %v after the kill, want within 5s", took)
	}
}

// killCase is one variant of a killed-holder test: the holder's expire,
// and whether its waiter must get in (the broken variant's must not).
type killCase struct {
	name, expire string
	wantFreed    bool
}

// killedTTL is the expire of a holder the killed-holder tests kill.
const killedTTL = time.Second

// killCases are a killed-holder test's variants: a holder whose expire is
// killedTTL, and the broken one, named broken, whose holder's is expire.
func killCases(broken, expire string) []killCase {
	return []killCase{{"expiring", killedTTL.String(), true}, {broken, expire, false}}
}

// killedSlack is how long past a killed holder's TTL its waiter may take
// to get in: a generous bound on liveness (the expiry is seen on the
// server's clock, and a waiter's slice ends at the holder's PTTL), far
// below what a hold that outlives its process would take.
const killedSlack = time.Second

// killedHolderFreed fails t unless what, a waiter's call that returned
// err, got in within the killed holder's killedTTL + killedSlack of held (when
// the holder had it) exactly when want: the broken variants' waiters must
// still be waiting.
func killedHolderFreed(t *testing.T, what string, err error, held time.Time, want bool) {
	t.Helper()
	ttl := killedTTL
	took := time.Since(held)
	t.Logf("holder killed; %s returned after %v of its %v TTL: %v", what, took, ttl, err)
	if freed := err == nil && took <= ttl+killedSlack; freed != want {
		t.Fatalf("%s = %v after %v; want it in within TTL + %v: %v", what, err, took, killedSlack, want)
	}
}
