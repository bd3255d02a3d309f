package redislock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// runFamilyWorker runs the worker modes of the Semaphore's (and RWMutex's)
// multi-process tests; ok is false for a mode it does not know.
func runFamilyWorker(mode string, c *redis.Client, name string) (code int, ok bool) {
	ctx := context.Background()
	fail := func(err error) (int, bool) { fmt.Fprintln(os.Stderr, "worker:", err); return 1, true }
	switch mode {
	case "semcounter": // W_ROUNDS sections under a semaphore of W_SIZE (0: none, the broken variant); prints the most it saw inside
		rounds, _ := strconv.Atoi(os.Getenv("W_ROUNDS"))
		size, _ := strconv.Atoi(os.Getenv("W_SIZE"))
		var s *redislock.Semaphore
		if size > 0 {
			var err error
			if s, err = redislock.NewSemaphore(c, name, size, redislock.WithExpire(30*time.Second)); err != nil {
				return fail(err)
			}
		}
		most := int64(0)
		for range rounds {
			var p *redislock.Permit
			if s != nil {
				var err error
				if p, err = s.Acquire(ctx); err != nil {
					return fail(err)
				}
			}
			n, err := c.Incr(ctx, name+":inside").Result()
			if err != nil {
				return fail(err)
			}
			most = max(most, n)
			time.Sleep(500 * time.Microsecond) // the section
			if err := c.Decr(ctx, name+":inside").Err(); err != nil {
				return fail(err)
			}
			if err := c.Incr(ctx, name+":sections").Err(); err != nil {
				return fail(err)
			}
			if p != nil {
				if err := p.Release(ctx); err != nil {
					return fail(err)
				}
			}
		}
		fmt.Println("most", most)
		return 0, true
	case "semhold": // take a permit of a semaphore of W_SIZE (default 1; W_EXPIRE, W_RENEW=1), say "held", wait for the loss, release (W_RELEASE=zadd: the broken variant puts itself back)
		expire, _ := time.ParseDuration(os.Getenv("W_EXPIRE"))
		size, err := strconv.Atoi(os.Getenv("W_SIZE"))
		if err != nil {
			size = 1
		}
		opts := []redislock.Option{redislock.WithExpire(expire)}
		if os.Getenv("W_RENEW") == "1" {
			opts = append(opts, redislock.WithAutoRenewal())
		}
		s, err := redislock.NewSemaphore(c, name, size, opts...)
		if err != nil {
			return fail(err)
		}
		p, err := s.Acquire(ctx)
		if err != nil {
			return fail(err)
		}
		fmt.Println("held")
		<-p.Done()
		fmt.Printf("lost: %v\n", p.Err())
		if os.Getenv("W_RELEASE") == "zadd" { // a renewal that recreates the permit
			// After the renewal that may have been in flight at the loss
			// (sent as the process resumed): it would find the permit put
			// back and set it to the 500 ms expire, which then runs out
			// before the test looks.
			time.Sleep(200 * time.Millisecond)
			ms := time.Now().Add(time.Minute).UnixMilli()
			fmt.Printf("release: %v\n", c.ZAdd(ctx, s.Key(), redis.Z{Score: float64(ms), Member: p.ID()}).Err())
			return 0, true
		}
		fmt.Printf("release: %v\n", p.Release(ctx))
		return 0, true
	case "rwread": // RLock the RWMutex W_NAME (W_EXPIRE), say "held", then sleep until killed
		expire, _ := time.ParseDuration(os.Getenv("W_EXPIRE"))
		rw, err := redislock.NewRWMutex(c, name, redislock.WithExpire(expire))
		if err != nil {
			return fail(err)
		}
		p, err := rw.RLock(ctx)
		if err != nil {
			return fail(err)
		}
		fmt.Println("held")
		<-p.Done()
		return 0, true
	}
	return 0, false
}

// startSemHolder starts a "semhold" worker and waits until it holds.
func startSemHolder(t *testing.T, addr, name, expire string, renew bool, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	r := "0"
	if renew {
		r = "1"
	}
	return startHeld(t, worker(t, "semhold", append([]string{"W_ADDR=" + addr, "W_NAME=" + name, "W_EXPIRE=" + expire, "W_RENEW=" + r}, env...)...))
}

// Sixteen processes × 200 sections under a size-3 semaphore, a probe
// counter in Redis (INCR on entry, DECR on exit): it never exceeds 3, does
// reach 3, and every section completes. Without the semaphore (the broken
// variant) the same processes exceed 3.
func TestSemaphoreMultiProcess(t *testing.T) {
	t.Parallel()
	procs, rounds := 16, 200
	if testing.Short() {
		procs, rounds = 6, 40
	}
	for _, tc := range []struct {
		name string
		size int
	}{{"size 3", 3}, {"broken/no semaphore", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			var cmds []*exec.Cmd
			var outs []io.Reader
			start := time.Now()
			for range procs {
				cmd := worker(t, "semcounter", "W_ADDR="+s.Addr, "W_NAME=pool", "W_ROUNDS="+strconv.Itoa(rounds), "W_SIZE="+strconv.Itoa(tc.size))
				cmds, outs = append(cmds, cmd), append(outs, redistest.StartProcess(t, cmd))
			}
			most := 0
			for i, cmd := range cmds {
				b, _ := io.ReadAll(outs[i])
				if err := cmd.Wait(); err != nil {
					t.Fatalf("worker: %v", err)
				}
				var m int
				if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "most %d", &m); err != nil {
					t.Fatalf("worker said %q", b)
				}
				most = max(most, m)
			}
			sections, _ := s.Client().Get(ctx, "pool:sections").Int()
			t.Logf("%d processes × %d sections in %v: at most %d inside at once", procs, rounds, time.Since(start).Round(time.Millisecond), most)
			if sections != procs*rounds {
				t.Fatalf("%d sections completed, want %d", sections, procs*rounds)
			}
			if tc.size > 0 && most != tc.size {
				t.Fatalf("at most %d inside at once; want exactly %d (never more, and reached)", most, tc.size)
			}
			if tc.size == 0 && most <= 3 {
				t.Fatalf("without the semaphore at most %d were inside at once; the probe should see more than 3", most)
			}
		})
	}
}

// A holder process SIGKILLed while holding a 1 s permit of a size-2
// semaphore, whose other permit a live holder keeps (so the holders key
// lives on): a waiter blocked on the semaphore holds within the TTL +
// 1 s (woken at the dead holder's expiry on the server's clock, its
// permit dropped). In the broken variant the dead holder's permit lasts an
// hour, as a permit counted without an expiry would, and the same check
// finds the waiter still waiting.
func TestSemaphoreHolderKilled(t *testing.T) {
	t.Parallel()
	long(t, "kills a holder process")
	for _, tc := range killCases("broken/permit outlives its holder", "1h") {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			live := mustSemaphore(t, s.Client(), "pool", 2, redislock.WithExpire(time.Minute))
			if _, err := live.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			holder, _ := startSemHolder(t, s.Addr, "pool", tc.expire, false, "W_SIZE=2")
			held := time.Now() // the holder acquired before this
			waiter := mustSemaphore(t, s.Client(), "pool", 2)
			got := make(chan error, 1)
			wctx, cancel := context.WithTimeout(ctx, killedTTL+killedSlack+time.Second)
			defer cancel()
			var wp *redislock.Permit
			go func() {
				var err error
				wp, err = waiter.Acquire(wctx)
				got <- err
			}()
			waitBlocked(t, s.Client(), 1) // the waiter sleeps in BLPOP
			holder.Process.Signal(syscall.SIGKILL)
			holder.Wait()
			err := <-got
			killedHolderFreed(t, "the waiter's Acquire()", err, held, tc.wantFreed)
			if err == nil {
				wp.Release(ctx)
			}
		})
	}
}

// A renewing holder process SIGSTOPped past its permit's expiry: a waiter
// takes the permit; when the holder resumes, its Done has fired, its
// Release returns ErrNotAcquired, and the holders are the new one alone.
// In the broken variant the resumed holder puts its permit back (as a
// renewal that recreates one would), and the same check finds two holders
// of a size-1 semaphore.
func TestSemaphoreHolderPausedPastTTL(t *testing.T) {
	quick(t)
	long(t, "pauses a holder process")
	for _, tc := range []struct {
		name, release string
		broken        bool
	}{
		{"release", "", false},
		{"broken/permit put back", "zadd", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, _ := started(t)
			holder, out := startSemHolder(t, s.Addr, "pool", "500ms", true, "W_RELEASE="+tc.release)
			holder.Process.Signal(syscall.SIGSTOP)
			paused := time.Now()
			nextSem := mustSemaphore(t, s.Client(), "pool", 1, redislock.WithExpire(30*time.Second))
			next, err := nextSem.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("holder paused; the next one acquired after %v (holder's permit: 500ms)", time.Since(paused))
			report := resumedAfterLoss(t, holder, out)
			if !tc.broken && !strings.Contains(report, "not held by this owner") {
				t.Fatalf("holder's Release after the loss: %q, want ErrNotAcquired", report)
			}
			holders, _, err := semHolders(ctx, nextSem)
			if err != nil {
				t.Fatal(err)
			}
			alone := len(holders) == 1 && holders[0].ID == next.ID()
			if alone == tc.broken {
				t.Fatalf("holders after the paused holder resumed: %v; want the new holder alone = %v", holders, !tc.broken)
			}
		})
	}
}

// Releasing k permits wakes k waiters within milliseconds, not at the end
// of their slice (2 s here). Waiters are on clients of their own, as
// processes would be. In the broken variant the permits are freed with a
// plain ZREM, which pushes no signal: the waiters sleep out their slice.
func TestSemaphoreReleaseWakesOnePerPermit(t *testing.T) {
	t.Parallel()
	const k = 3
	andBroken(t, "release", "freed without a signal", func(t *testing.T, broken bool) {
		s, ctx, admin := started(t)
		var holders []*redislock.Permit
		for range k {
			h, err := mustSemaphore(t, s.Client(), "pool", k).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			holders = append(holders, h)
		}
		type woken struct {
			at  time.Time
			err error
		}
		got := make(chan woken, k)
		for range k {
			w := mustSemaphore(t, s.Client(), "pool", k)
			go func() {
				p, err := w.Acquire(ctx)
				got <- woken{time.Now(), err}
				if err == nil {
					p.Release(ctx)
				}
			}()
		}
		waitBlocked(t, admin, k)
		released := time.Now()
		for _, h := range holders {
			if broken {
				admin.ZRem(ctx, h.Key(), h.ID())
			} else if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var lateness []time.Duration
		for range k {
			w := <-got
			if w.err != nil {
				t.Fatalf("waiter: %v", w.err)
			}
			lateness = append(lateness, w.at.Sub(released).Round(10*time.Microsecond))
		}
		t.Logf("%d permits freed; the waiters held after %v", k, lateness)
		late := false
		for _, d := range lateness {
			late = late || d > time.Second // the slice is 2 s
		}
		if late != broken {
			t.Fatalf("waiters held after %v; want all woken by the releases = %v", lateness, !broken)
		}
	})
}
