package redislock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
	case "hold": // acquire (W_EXPIRE, W_RENEW=1), say "held", wait for the loss, release
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
		fmt.Printf("release: %v\n", l.Release(ctx))
		return 0
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
func startHolder(t *testing.T, addr, name, expire string, renew bool) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	r := "0"
	if renew {
		r = "1"
	}
	cmd := worker(t, "hold", "W_ADDR="+addr, "W_NAME="+name, "W_EXPIRE="+expire, "W_RENEW="+r)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	br := bufio.NewReader(out)
	if line, err := br.ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("holder process said %q, %v", line, err)
	}
	return cmd, br
}

// Sixteen processes × 500 critical sections on one lock, a non-atomic
// counter inside: exactly 8000. Without the lock (the broken variant) the
// same processes lose updates.
func TestMultiProcessMutualExclusion(t *testing.T) {
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
// acquires within the TTL + 300 ms.
func TestHolderKilled(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	holder, _ := startHolder(t, s.Addr, "job", "1s", false)
	held := time.Now() // the holder acquired before this
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	waiter := mustNew(t, s.Client(), "job")
	mustAcquire(t, ctx, waiter)
	took := time.Since(held)
	t.Logf("holder killed; waiter held the lock %v after the holder had it (TTL 1s)", took)
	if took > time.Second+300*time.Millisecond {
		t.Fatalf("waiter acquired %v after the holder, want within TTL + 300ms", took)
	}
}

// A holder process SIGSTOPped past its TTL, with auto-renewal: another
// client acquires; when the holder resumes, its Done has fired and its
// Release returns ErrNotAcquired, and the new owner's key is untouched.
func TestHolderPausedPastTTL(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	admin := s.Client()
	holder, out := startHolder(t, s.Addr, "job", "500ms", true)
	holder.Process.Signal(syscall.SIGSTOP)
	paused := time.Now()

	next := mustNew(t, s.Client(), "job", redislock.WithExpire(30*time.Second))
	mustAcquire(t, ctx, next)
	t.Logf("holder paused; the next client acquired after %v (holder TTL 500ms)", time.Since(paused))
	holder.Process.Signal(syscall.SIGCONT)
	rest, _ := io.ReadAll(out)
	holder.Wait()
	report := string(rest)
	t.Logf("holder after resuming: %q", report)
	if !strings.Contains(report, "lost: ") || !strings.Contains(report, "lock lost") {
		t.Fatalf("holder did not see its loss: %q", report)
	}
	if !strings.Contains(report, "release: ") || !strings.Contains(report, "not held by this owner") {
		t.Fatalf("holder's Release after the loss: %q, want ErrNotAcquired", report)
	}
	if got := admin.Get(ctx, "lock:job").Val(); got != next.ID() {
		t.Fatalf("lock:job = %q, want the new owner's id", got)
	}
	if ttl := admin.PTTL(ctx, "lock:job").Val(); ttl < 20*time.Second {
		t.Fatalf("new owner's PTTL = %v: the paused holder renewed it", ttl)
	}
}

// Redis SIGKILLed and restarted (empty) while 8 waiters block: each
// acquires (and releases) or returns an error within restart + TTL + 1 s.
func TestRedisRestartWithWaiters(t *testing.T) {
	const ttl = time.Second
	s := redistest.Start(t)
	ctx := ctxT(t)
	mustAcquire(t, ctx, mustNew(t, s.Client(), "job", redislock.WithExpire(ttl)))
	admin := s.Client()
	var wg sync.WaitGroup
	results := make(chan time.Time, 8)
	for i := 0; i < 8; i++ {
		l := mustNew(t, s.Client(), "job")
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			if err := l.Acquire(wctx); err == nil {
				l.Release(ctx)
			}
			results <- time.Now()
		}()
	}
	waitBlocked(t, admin, 8)
	s.Kill()
	s.Restart()
	restarted := time.Now()
	wg.Wait()
	close(results)
	var last time.Time
	for at := range results {
		if at.After(last) {
			last = at
		}
	}
	t.Logf("Redis restarted; last of 8 waiters done %v later", last.Sub(restarted))
	if last.Sub(restarted) > ttl+time.Second {
		t.Fatalf("last waiter returned %v after the restart, want within TTL + 1s", last.Sub(restarted))
	}
}

// Redis killed and not restarted: every blocked Acquire returns an error
// within 5 s.
func TestRedisKilledWaitersFail(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
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
