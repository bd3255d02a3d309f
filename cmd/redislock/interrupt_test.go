package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
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
	_, _, errOut := runCLI(t, "run", "--help")
	for _, want := range []string{"128+N", fmt.Sprintf("SIGINT %d", 128+int(syscall.SIGINT))} {
		if !strings.Contains(errOut, want) {
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
