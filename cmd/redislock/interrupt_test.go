package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/faultproxy"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// waitBlocked waits until a client of the server is blocked in a command
// whose name starts with cmd (BLPOP, or EVAL/EVALSHA held by CLIENT PAUSE),
// failing t after 10 s.
func waitBlocked(t *testing.T, c *redis.Client, cmd string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(c.ClientList(context.Background()).Val(), "\n") {
			if strings.Contains(line, " flags=b ") && strings.Contains(line, " cmd="+cmd) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no client blocked in %s within 10s", cmd)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitExit waits for cmd, started, to exit, killing it and failing t after
// bound, and returns how long it took.
func waitExit(t *testing.T, cmd *exec.Cmd, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(bound):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("%v still running %v on", cmd.Args, bound)
	}
	return time.Since(start)
}

// A signal while run waits for the lock ends it with 128+N, whichever of
// the signals run handles it is, and leaves the holder's lock alone.
func TestRunInterruptedWhileWaiting(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			s := redistest.Start(t)
			ctx := ctxT(t)
			url := "redis://" + s.Addr + "/0"
			holder, _ := redislock.New(s.Client(), "job", redislock.WithID("holder-1"))
			if err := holder.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			cmd := cliCmd(t, "run", "--redis", url, "job", "--", "true")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitBlocked(t, s.Client(), "blpop")
			cmd.Process.Signal(sig)
			took := waitExit(t, cmd, 10*time.Second)
			t.Logf("%v -> exit: %v", sig, took)
			// The wait slice is 2 s: an exit that waited for the BLPOP to
			// end (as before) would take most of it.
			if took > 500*time.Millisecond {
				t.Fatalf("run took %v to exit after %v while waiting; want it at once", took, sig)
			}
			want := 128 + int(sig)
			if code := cmd.ProcessState.ExitCode(); code != want || !strings.Contains(stderr.String(), "interrupted by SIG") {
				t.Fatalf("run interrupted by %v while waiting: exit %d, stderr %q; want %d and an interruption message", sig, code, stderr.String(), want)
			}
			if got := s.Client().Get(ctx, "lock:job").Val(); got != "holder-1" {
				t.Fatalf("the interrupted run changed the key to %q", got)
			}
			if keys := s.Client().Keys(ctx, "*:wake:*").Val(); len(keys) != 0 {
				t.Fatalf("the interrupted run left %q behind", keys)
			}
		})
	}
}

// How soon run exits on SIGINT while it waits, over 20 runs: the figure
// the README quotes. Every run must leave the holder's key alone and exit
// with 130; the bound only separates "at once" from "at the end of the
// 2 s wait slice".
func TestRunInterruptLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("20 processes; -short skips it")
	}
	s := redistest.Start(t)
	ctx := ctxT(t)
	url := "redis://" + s.Addr + "/0"
	holder, _ := redislock.New(s.Client(), "job", redislock.WithID("holder-1"))
	if err := holder.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	var took []time.Duration
	for i := range 20 {
		cmd := cliCmd(t, "run", "--redis", url, "job", "--", "true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitBlocked(t, s.Client(), "blpop")
		time.Sleep(time.Duration(i%5) * 20 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGINT)
		took = append(took, waitExit(t, cmd, 10*time.Second))
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Fatalf("run %d: exit %d after SIGINT, want 130", i, code)
		}
		if got := s.Client().Get(ctx, "lock:job").Val(); got != "holder-1" {
			t.Fatalf("run %d changed the key to %q", i, got)
		}
		for strings.Contains(s.Client().ClientList(ctx).Val(), "cmd=blpop") {
			time.Sleep(time.Millisecond) // its connection is gone before the next one waits
		}
	}
	slices.Sort(took)
	t.Logf("SIGINT -> exit, 20 runs: p50 %v, max %v", took[9], took[19])
	if took[19] > 500*time.Millisecond {
		t.Fatalf("slowest exit after SIGINT: %v; want far less than the 2 s slice", took[19])
	}
}

// SIGINT during the one try of --no-wait is an interruption (130), not a
// busy lock (75). CLIENT PAUSE holds the try's script in Redis, so the
// signal surely arrives while it is in flight.
func TestRunNoWaitInterrupted(t *testing.T) {
	quick(t)
	s := redistest.Start(t)
	admin := s.Client()
	url := "redis://" + s.Addr + "/0"
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", 30000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "CLIENT", "UNPAUSE") })
	cmd := cliCmd(t, "run", "-n", "--redis", url, "job", "--", "true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitBlocked(t, admin, "eval")
	cmd.Process.Signal(syscall.SIGINT)
	// The try ends when go-redis gives up reading its reply, within the
	// client's read timeout (3 s) and one retry.
	took := waitExit(t, cmd, 30*time.Second)
	t.Logf("SIGINT -> exit: %v; stderr %q", took, stderr.String())
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "interrupted by SIGINT") {
		t.Fatalf("run -n interrupted by SIGINT: exit %d, stderr %q; want 130 and an interruption message", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "busy") {
		t.Fatalf("an interruption reported as a busy lock: %q", stderr.String())
	}
}

// The help documents the exit code of an interruption that the tests above
// check.
func TestRunHelpDocumentsInterruption(t *testing.T) {
	_, help, _ := runCLI(t, "run", "--help")
	for _, want := range []string{"128+N", fmt.Sprintf("SIGINT %d", 128+int(syscall.SIGINT))} {
		if !strings.Contains(help, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
}

// With the default 30 s expire (renewal every 20 s), COMMAND gets SIGTERM
// within milliseconds of its lock being deleted or taken: the key is
// watched. Measured over 20 runs from the DEL to COMMAND's trap having
// written its mark (polled every millisecond); the bound only separates
// "at once" from "at the next renewal".
func TestRunLossSignalsCommandAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("20 processes; -short skips it")
	}
	s := redistest.Start(t)
	ctx := ctxT(t)
	url := "redis://" + s.Addr + "/0"
	var took []time.Duration
	for i := range 20 {
		dir := t.TempDir()
		mark, ready := filepath.Join(dir, "mark"), filepath.Join(dir, "ready")
		script := `trap 'touch "$0"; exit 0' TERM; touch "$1"; while :; do sleep 0.05; done`
		cmd := cliCmd(t, "run", "--redis", url, "job", "--", "sh", "-c", script, mark, ready)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFile(t, ready)
		start := time.Now()
		if i%2 == 0 {
			s.Client().Del(ctx, "lock:job")
		} else {
			s.Client().Set(ctx, "lock:job", "someone-else", time.Minute) // taken over after an expiry
		}
		for {
			if _, err := os.Stat(mark); err == nil {
				break
			}
			if time.Since(start) > 10*time.Second {
				cmd.Process.Kill()
				t.Fatalf("run %d: COMMAND got no SIGTERM within 10s of the loss", i)
			}
			time.Sleep(time.Millisecond)
		}
		took = append(took, time.Since(start))
		waitExit(t, cmd, 10*time.Second)
		if code := cmd.ProcessState.ExitCode(); code != exitLost {
			t.Fatalf("run %d: exit %d, want %d", i, code, exitLost)
		}
		s.Client().Del(ctx, "lock:job")
	}
	slices.Sort(took)
	t.Logf("loss -> COMMAND got SIGTERM, 20 runs: p50 %v, max %v", took[9], took[19])
	if took[19] > time.Second {
		t.Fatalf("slowest SIGTERM after a loss: %v; want far less than the 20 s renewal interval", took[19])
	}
}

// When Redis stops answering while COMMAND runs, the lock counts as lost
// the safety margin (--kill-after + 1s) before its key can expire: a
// COMMAND that ignores SIGTERM is killed about a second before the key
// can expire, so it never runs while another host may hold the lock.
func TestRunKillsCommandBeforeTheKeyExpires(t *testing.T) {
	quick(t)
	s := redistest.Start(t)
	ctx := ctxT(t)
	p, err := faultproxy.Start(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dir := t.TempDir()
	ready, pidFile := filepath.Join(dir, "ready"), filepath.Join(dir, "pid")
	script := `trap '' TERM; echo $$ > "$1"; touch "$0"; while :; do sleep 0.05; done`
	cmd := cliCmd(t, "run", "--redis", "redis://"+p.Addr()+"/0", "--expire", "3s", "--kill-after", "500ms",
		"--release-timeout", "200ms", "job", "--", "sh", "-c", script, ready, pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFile(t, ready)
	data, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	p.Blackhole(true) // renewals and the key's watch go unanswered from now on
	cut := time.Now()
	admin := s.Client()
	var commandGone, keyGone time.Duration
	for commandGone == 0 || keyGone == 0 {
		if time.Since(cut) > 10*time.Second {
			t.Fatalf("after 10s: COMMAND gone after %v, key gone after %v", commandGone, keyGone)
		}
		if commandGone == 0 && syscall.Kill(pid, 0) != nil {
			commandGone = time.Since(cut)
		}
		if keyGone == 0 && admin.Exists(ctx, "lock:job").Val() == 0 {
			keyGone = time.Since(cut)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("Redis cut off: COMMAND killed after %v, the key expired after %v", commandGone, keyGone)
	if commandGone > keyGone-500*time.Millisecond {
		t.Fatalf("COMMAND killed %v after the cut, the key expired %v after it: want COMMAND gone about 1s before", commandGone, keyGone)
	}
	p.Blackhole(false)
	waitExit(t, cmd, 10*time.Second)
	if code := cmd.ProcessState.ExitCode(); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
}

// The safety margin of run: --kill-after + 1s, at most half of --expire.
func TestRunMargin(t *testing.T) {
	for _, tc := range []struct{ expire, killAfter, want time.Duration }{
		{30 * time.Second, 10 * time.Second, 11 * time.Second},
		{5 * time.Second, 10 * time.Second, 2500 * time.Millisecond},
		{3 * time.Second, 500 * time.Millisecond, 1500 * time.Millisecond},
		{time.Millisecond, 0, 500 * time.Microsecond},
	} {
		if got := runMargin(tc.expire, tc.killAfter); got != tc.want {
			t.Errorf("runMargin(%v, %v) = %v, want %v", tc.expire, tc.killAfter, got, tc.want)
		}
	}
}
