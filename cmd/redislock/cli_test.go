package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// cliCmd returns the redislock command line as a separate process: the test
// binary, re-executed as main.
func cliCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	return cmd
}

// exitOf runs cmd to the end and returns its exit code and stderr.
func exitOf(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitKey waits until key exists, failing t after 10 s.
func waitKey(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Exists(context.Background(), key).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 10s", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFile waits until path exists, failing t after 10 s.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 10s", path)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Several `redislock run` of a command that logs its start and end, started
// together again and again: no two intervals overlap. With a lock name per
// process (the broken variant) they do.
func TestRunExcludes(t *testing.T) {
	quick(t)
	for _, tc := range []struct {
		name        string
		sameLock    bool
		wantOverlap bool
	}{
		{"one lock", true, false},
		{"broken/a lock each", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			url := "redis://" + s.Addr + "/0"
			log := filepath.Join(t.TempDir(), "log")
			script := `echo "start $(date +%s%N)" >> "$0"; sleep 0.03; echo "end $(date +%s%N)" >> "$0"`
			const rounds, procs = 6, 3
			for r := 0; r < rounds; r++ {
				var wg sync.WaitGroup
				for p := 0; p < procs; p++ {
					name := "job"
					if !tc.sameLock {
						name += strconv.Itoa(p)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						code, errOut := exitOf(t, cliCmd(t, "run", "--redis", url, name, "--", "sh", "-c", script, log))
						if code != 0 {
							t.Errorf("run exit %d: %s", code, errOut)
						}
					}()
				}
				wg.Wait()
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			overlap, n := overlaps(t, string(data))
			if n != rounds*procs {
				t.Fatalf("log has %d intervals, want %d", n, rounds*procs)
			}
			if overlap != tc.wantOverlap {
				t.Fatalf("intervals overlap = %v, want %v:\n%s", overlap, tc.wantOverlap, data)
			}
		})
	}
}

// overlaps reports whether the start/end log has two intervals that
// overlap, and how many intervals it has. Without overlap its lines
// alternate start, end, with times that never go back.
func overlaps(t *testing.T, log string) (overlap bool, n int) {
	var kinds []string
	var times []int64
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("bad log line %q", sc.Text())
		}
		ts, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("bad log line %q", sc.Text())
		}
		kinds, times = append(kinds, f[0]), append(times, ts)
		if f[0] == "end" {
			n++
		}
	}
	for i := range kinds {
		want := "start"
		if i%2 == 1 {
			want = "end"
		}
		if kinds[i] != want || (i > 0 && times[i] < times[i-1]) {
			overlap = true
		}
	}
	return overlap, n
}

func TestRunBusy(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	url := "redis://" + s.Addr + "/0"
	holder, _ := redislock.New(s.Client(), "job", redislock.WithID("holder-1"))
	if err := holder.Acquire(ctx); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	code, errOut := exitOf(t, cliCmd(t, "run", "-n", "--redis", url, "job", "--", "true"))
	if code != exitBusy || !strings.Contains(errOut, `busy (held by "holder-1")`) || time.Since(start) > 5*time.Second {
		t.Fatalf("run -n while held: exit %d after %v, %q; want %d at once", code, time.Since(start), errOut, exitBusy)
	}
	if code, _ := exitOf(t, cliCmd(t, "run", "-n", "-E", "3", "--redis", url, "job", "--", "true")); code != 3 {
		t.Fatalf("run -n -E 3 while held: exit %d, want 3", code)
	}
	// -E 0: a busy lock is a silent success (cron mails any output), and a
	// bare host:port is a Redis address.
	if code, errOut := exitOf(t, cliCmd(t, "run", "-n", "-E", "0", "--redis", s.Addr, "job", "--", "true")); code != 0 || errOut != "" {
		t.Fatalf("run -n -E 0 --redis %s while held: exit %d, %q; want 0 and nothing", s.Addr, code, errOut)
	}
	// -q: silent, the exit code kept (flock -n's way).
	for _, q := range []string{"-q", "--quiet"} {
		if code, errOut := exitOf(t, cliCmd(t, "run", "-n", q, "--redis", url, "job", "--", "true")); code != exitBusy || errOut != "" {
			t.Fatalf("run -n %s while held: exit %d, %q; want %d and nothing", q, code, errOut, exitBusy)
		}
	}
	start = time.Now()
	code, _ = exitOf(t, cliCmd(t, "run", "-w", "300ms", "--redis", url, "job", "--", "true"))
	waited := time.Since(start)
	t.Logf("run -w 300ms gave up after %v (process start included)", waited)
	if code != exitBusy || waited < 300*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("run -w 300ms: exit %d after %v, want %d after about 300ms", code, waited, exitBusy)
	}
	if got := s.Client().Get(ctx, "lock:job").Val(); got != "holder-1" {
		t.Fatalf("busy runs changed the key to %q", got)
	}
}

// A run that waits behind a holder while Redis stops answering exits as
// for an outage (1, Redis did not answer), not as busy: a cron job run with
// -E 0 must not skip silently through it.
func TestRunBusyThenSilentRedisIsAnOutage(t *testing.T) {
	quick(t)
	s := redistest.Start(t)
	t.Cleanup(s.Cont)
	ctx := ctxT(t)
	holder, _ := redislock.New(s.Client(), "job", redislock.WithID("holder-1"))
	if err := holder.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := cliCmd(t, "run", "-w", "1s", "--redis", s.Addr, "job", "--", "true")
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitBlocked(t, s.Client(), 1) // the run waits in BLPOP
	s.Pause()
	err := cmd.Wait()
	s.Cont()
	code := cmd.ProcessState.ExitCode()
	if code != exitFail || !strings.Contains(errOut.String(), "Redis did not answer") || strings.Contains(errOut.String(), "released just after") {
		t.Fatalf("run -w 1s with Redis paused during its wait: exit %d (%v), %q; want %d, and that Redis did not answer", code, err, errOut.String(), exitFail)
	}
}

func TestRunExitCodeAndRenewal(t *testing.T) {
	quick(t)
	s := redistest.Start(t)
	ctx := ctxT(t)
	admin := s.Client()
	url := "redis://" + s.Addr + "/0"
	if code, _ := exitOf(t, cliCmd(t, "run", "--redis", url, "job", "--", "sh", "-c", "exit 7")); code != 7 {
		t.Fatalf("run of `exit 7`: exit %d, want 7", code)
	}
	if code, _ := exitOf(t, cliCmd(t, "run", "--redis", url, "job", "--", "no-such-command-xyz")); code != exitNotFound {
		t.Fatalf("run of a missing command: exit %d, want %d", code, exitNotFound)
	}
	if admin.Exists(ctx, "lock:job").Val() != 0 {
		t.Fatal("lock left held after the runs")
	}

	// A command that outlives the expire twice keeps the lock: for its
	// first 3 s the key holds its id. The expire is no shorter than 1.5 s:
	// run's safety margin is half of it, so each renewal has a sixth of
	// it (250 ms) to land before the local deadline, time enough on a
	// loaded machine (with 300 ms, 50 ms, CI's race run lost the lock).
	cmd := cliCmd(t, "run", "--redis", url, "--expire", "1500ms", "--id", "cli-run", "job", "--", "sleep", "3.3")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitKey(t, admin, "lock:job")
	for start := time.Now(); time.Since(start) < 3*time.Second; time.Sleep(10 * time.Millisecond) {
		if got, err := admin.Get(ctx, "lock:job").Result(); err != nil || got != "cli-run" {
			cmd.Process.Kill()
			cmd.Wait() // stderr is complete once Wait returns
			t.Fatalf("%v into the run the key holds %q (%v), want cli-run; run said %q", time.Since(start), got, err, stderr.String())
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v; it said %q", err, stderr.String())
	}
	if admin.Exists(ctx, "lock:job").Val() != 0 {
		t.Fatal("lock left held after the run")
	}
}

// SIGTERM to redislock is passed on to COMMAND, and the lock is released
// once it exits: a waiter gets it at once, not at the TTL.
func TestRunSIGTERMReleases(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	url := "redis://" + s.Addr + "/0"
	cmd := cliCmd(t, "run", "--redis", url, "--expire", "30s", "job", "--", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitKey(t, s.Client(), "lock:job")
	waiter, _ := redislock.New(s.Client(), "job")
	got := make(chan time.Time, 1)
	go func() {
		if err := waiter.Acquire(ctx); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	signalled := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	at := <-got
	t.Logf("SIGTERM -> waiter holding: %v", at.Sub(signalled))
	if at.Sub(signalled) > 2*time.Second {
		t.Fatalf("waiter got the lock %v after SIGTERM, want at once", at.Sub(signalled))
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("run exit %d (%v), want %d (COMMAND killed by SIGTERM)", code, err, 128+int(syscall.SIGTERM))
	}
	waiter.Release(ctx)
}

// The lock deleted under a running COMMAND: COMMAND gets SIGTERM and
// redislock exits with the lost-lock code.
func TestRunLostLockTerminates(t *testing.T) {
	s := redistest.Start(t)
	url := "redis://" + s.Addr + "/0"
	mark := filepath.Join(t.TempDir(), "mark")
	ready := filepath.Join(t.TempDir(), "ready")
	script := `trap 'echo got-term > "$0"; exit 0' TERM; touch "$1"; while :; do sleep 0.05; done`
	cmd := cliCmd(t, "run", "--redis", url, "--expire", "600ms", "job", "--", "sh", "-c", script, mark, ready)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready) // the loss is noticed at once: COMMAND must have its trap set first
	deleted := time.Now()
	s.Client().Del(context.Background(), "lock:job")
	cmd.Wait()
	t.Logf("key deleted -> redislock exited: %v", time.Since(deleted))
	if code := cmd.ProcessState.ExitCode(); code != exitLost || !strings.Contains(stderr.String(), "lost") {
		t.Fatalf("run exit %d, stderr %q; want %d and a message about the loss", code, stderr.String(), exitLost)
	}
	if data, _ := os.ReadFile(mark); strings.TrimSpace(string(data)) != "got-term" {
		t.Fatalf("COMMAND did not get SIGTERM (mark %q)", data)
	}
	// COMMAND's shell may say "Terminated"; redislock says one line.
	if n := strings.Count(stderr.String(), "redislock run:"); n != 1 {
		t.Fatalf("redislock wrote %d lines, want 1: %q", n, stderr.String())
	}
}

func TestAdminCommands(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	admin := s.Client()
	url := "redis://" + s.Addr + "/0"
	for _, name := range []string{"a", "b"} {
		l, _ := redislock.New(s.Client(), name, redislock.WithID("owner-"+name), redislock.WithExpire(time.Minute))
		if err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	forever, _ := redislock.New(s.Client(), "c", redislock.WithID("owner-c"), redislock.WithExpire(0))
	if err := forever.Acquire(ctx); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, "status", "--redis", url, "a", "--json")
	var st lockStatus
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status --json: exit %d, %q %q", code, out, errOut)
	}
	if !st.Held || st.Owner != "owner-a" || st.Key != "lock:a" || st.TTLms == nil || *st.TTLms <= 50000 {
		t.Fatalf("status a = %+v", st)
	}
	code, out, _ = runCLI(t, "status", "--redis", url, "--json", "nobody")
	st = lockStatus{}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Held || st.TTLms != nil || st.Owner != "" {
		t.Fatalf("status of a free lock: exit %d, %q", code, out)
	}
	if code, out, _ = runCLI(t, "status", "--redis", url, "c"); code != 0 || !strings.Contains(out, `c: held by "owner-c", no expire`) {
		t.Fatalf("status c: exit %d, %q", code, out)
	}

	code, out, _ = runCLI(t, "list", "--redis", url, "--json")
	var all []lockStatus
	if code != 0 || json.Unmarshal([]byte(out), &all) != nil || len(all) != 3 {
		t.Fatalf("list --json: exit %d, %q", code, out)
	}
	if all[2].Name != "c" || *all[2].TTLms != -1 || all[0].Owner != "owner-a" {
		t.Fatalf("list --json = %+v", all)
	}
	if code, out, _ = runCLI(t, "list", "--redis", url, "[ab]"); code != 0 || strings.Count(out, "owner-") != 2 {
		t.Fatalf("list [ab]: exit %d, %q", code, out)
	}

	if code, out, _ = runCLI(t, "reset", "--redis", url, "a"); code != 0 || !strings.Contains(out, `was held by "owner-a"`) {
		t.Fatalf("reset a: exit %d, %q", code, out)
	}
	if admin.Exists(ctx, "lock:a").Val() != 0 || admin.LLen(ctx, "lock-signal:a").Val() != 1 {
		t.Fatal("reset a did not delete and signal")
	}
	// reset-all refuses without --yes when stdin is not a terminal.
	if code, _, errOut = runCLI(t, "reset-all", "--redis", url); code != exitUsage || !strings.Contains(errOut, "--yes") {
		t.Fatalf("reset-all without --yes: exit %d, %q", code, errOut)
	}
	if admin.Exists(ctx, "lock:b").Val() != 1 {
		t.Fatal("reset-all without --yes reset a lock")
	}
	if code, out, _ = runCLI(t, "reset-all", "--redis", url, "--yes"); code != 0 || !strings.Contains(out, "reset 2 locks") {
		t.Fatalf("reset-all --yes: exit %d, %q", code, out)
	}
	if n := admin.Exists(ctx, "lock:b", "lock:c").Val(); n != 0 {
		t.Fatalf("%d locks left after reset-all", n)
	}
}

// Bad input: one line on stderr, a non-zero exit, and nothing written.
func TestCLIErrors(t *testing.T) {
	s := redistest.Start(t)
	url := "redis://" + s.Addr + "/0"
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{nil, exitUsage, "Usage"},
		{[]string{"bogus"}, exitUsage, `unknown command "bogus"`},
		{[]string{"run", "--redis", url, "job", "true"}, exitUsage, "missing --"},
		{[]string{"run", "--redis", url, "--", "true"}, exitUsage, "exactly one lock NAME"},
		{[]string{"run", "--redis", url, "a", "b", "--", "true"}, exitUsage, "exactly one lock NAME"},
		{[]string{"run", "--redis", url, "job", "--"}, exitUsage, "missing --"},
		{[]string{"run", "--redis", url, "--expire", "0", "job", "--", "true"}, exitUsage, "--expire must be at least 1ms"},
		{[]string{"run", "--redis", url, "--expire", "500us", "job", "--", "true"}, exitUsage, "--expire must be at least 1ms"},
		{[]string{"run", "--redis", url, "--expire", "-1s", "job", "--", "true"}, exitUsage, "--expire must be at least 1ms"},
		{[]string{"run", "--redis", url, "--max-hold", "1s", "job", "--", "true"}, exitUsage, "--max-hold must be 0 (no limit) or at least --expire (30s)"},
		{[]string{"run", "--redis", url, "--max-hold", "-1s", "job", "--", "true"}, exitUsage, "--max-hold must be 0"},
		{[]string{"run", "--redis", url, "--wait", "-1s", "job", "--", "true"}, exitUsage, "--wait must not be negative"},
		{[]string{"run", "--redis", url, "--kill-after", "-1s", "job", "--", "true"}, exitUsage, "--kill-after must not be negative"},
		{[]string{"run", "--redis", url, "--release-timeout", "0", "job", "--", "true"}, exitUsage, "--release-timeout must be more than 0"},
		{[]string{"run", "--redis", url, "--id", "", "job", "--", "true"}, exitUsage, "--id must not be empty"},
		{[]string{"run", "--redis", url, "--prefix", "", "job", "--", "true"}, exitUsage, "--prefix must not be empty"},
		{[]string{"run", "--redis", url, "", "--", "true"}, exitUsage, "lock NAME must not be empty"},
		{[]string{"run", "--cluster", "127.0.0.1:1", "a}b", "--", "true"}, exitUsage, "with --cluster, lock NAME must not contain '}'"},
		{[]string{"run", "--cluster", "127.0.0.1:1", "--prefix", "{p}", "job", "--", "true"}, exitUsage, "with --cluster, --prefix must not contain"},
		{[]string{"run", "--redis", url, "-n", "-w", "1s", "job", "--", "true"}, exitUsage, "exclude each other"},
		{[]string{"run", "--redis", url, "-E", "300", "job", "--", "true"}, exitUsage, "--conflict-exit-code"},
		{[]string{"run", "--redis", url, "--bogus", "job", "--", "true"}, exitUsage, "flag provided but not defined"},
		{[]string{"run", "--redis", "http://x", "job", "--", "true"}, exitUsage, "bad --redis URL"},
		{[]string{"run", "--redis", "redis://127.0.0.1:1/0", "job", "--", "true"}, exitFail, "cannot reach Redis at 127.0.0.1:1"},
		{[]string{"status", "--redis", url}, exitUsage, "want 1 arguments"},
		{[]string{"status", "--redis", url, ""}, exitUsage, "lock NAME must not be empty"},
		{[]string{"status", "--redis", url, "--prefix", "", "job"}, exitUsage, "--prefix must not be empty"},
		{[]string{"reset", "--redis", url, ""}, exitUsage, "lock NAME must not be empty"},
		{[]string{"reset-all", "--redis", url, "--prefix", "", "--yes"}, exitUsage, "--prefix must not be empty"},
		{[]string{"list", "--cluster", "127.0.0.1:1", "--prefix", "a{"}, exitUsage, "with --cluster, --prefix must not contain"},
		{[]string{"check", "--redis", url, "--replica-ack", "-1"}, exitUsage, "--replica-ack must not be negative"},
		{[]string{"check", "--redis", url, "--replica-ack", "1", "--replica-ack-timeout", "0"}, exitUsage, "--replica-ack-timeout must be at least 1ms"},
		{[]string{"status", "--redis", "redis://127.0.0.1:1/0", "job"}, exitFail, "cannot reach Redis"},
		{[]string{"list", "--redis", url, "a", "b"}, exitUsage, "want 0 to 1 arguments"},
		{[]string{"reset", "--redis", url}, exitUsage, "want 1 arguments"},
		{[]string{"reset-all", "--redis", url, "extra"}, exitUsage, "want 0 arguments"},
		{[]string{"demo", "--workers", "0"}, exitUsage, "--workers"},
		{[]string{"demo", "--hold", "2s", "--expire", "1s"}, exitUsage, "--expire"},
		{[]string{"demo", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"demo", "--redis", "redis://127.0.0.1:1/0"}, exitFail, "cannot reach Redis at 127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tt.wantCode, tt.wantErr)
			}
			if tt.wantCode == exitFail && strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("more than one line on stderr:\n%s", errOut)
			}
			// The command line speaks of its flags, not of the library's
			// options.
			if strings.Contains(errOut, "invalid argument") {
				t.Fatalf("stderr %q speaks the library's words", errOut)
			}
		})
	}
	if n := s.Client().DBSize(context.Background()).Val(); n != 0 {
		t.Fatalf("bad command lines wrote %d keys", n)
	}
}

// A COMMAND that ignores SIGTERM after a loss is killed after --kill-after.
func TestRunLostLockKillsStubbornCommand(t *testing.T) {
	s := redistest.Start(t)
	url := "redis://" + s.Addr + "/0"
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := cliCmd(t, "run", "--redis", url, "--expire", "600ms", "--kill-after", "300ms", "job", "--",
		"sh", "-c", `trap '' TERM; touch "$0"; while :; do sleep 0.05; done`, ready)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready) // COMMAND ignores SIGTERM from now on
	deleted := time.Now()
	s.Client().Del(context.Background(), "lock:job")
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("redislock still running 10s after the loss: COMMAND was not killed")
	}
	took := time.Since(deleted)
	t.Logf("key deleted -> COMMAND killed and redislock exited: %v", took)
	if code := cmd.ProcessState.ExitCode(); code != exitLost || took < 300*time.Millisecond {
		t.Fatalf("run exit %d after %v, want %d after the 300ms grace", code, took, exitLost)
	}
}

func TestCheckCommand(t *testing.T) {
	s := redistest.Start(t)
	url := "redis://" + s.Addr + "/0"
	if code, out, errOut := runCLI(t, "check", "--redis", url); code != exitOK {
		t.Fatalf("check on noeviction: exit %d, %q %q", code, out, errOut)
	}
	s.Client().ConfigSet(context.Background(), "maxmemory-policy", "volatile-lru")
	code, out, _ := runCLI(t, "check", "--redis", url, "--json")
	var findings []struct{ Severity, Node, Message string }
	if code != exitProblems || json.Unmarshal([]byte(out), &findings) != nil || len(findings) == 0 ||
		findings[0].Severity != "problem" || !strings.Contains(findings[0].Message, "volatile-lru") {
		t.Fatalf("check on volatile-lru: exit %d, %q", code, out)
	}
	if code, _, errOut := runCLI(t, "check", "--redis", url, "--replica-ack", "-1"); code != exitUsage {
		t.Fatalf("check --replica-ack -1: exit %d, %q", code, errOut)
	}
}

// list and status walk every master of a cluster, with hash-tagged keys.
func TestClusterCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := redistest.StartCluster(t, 3)
	ctx := ctxT(t)
	cc := cl.Client(t)
	for i := 0; i < 6; i++ {
		l, err := redislock.New(cc, fmt.Sprintf("job-%d", i), redislock.WithExpire(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	seeds := strings.Join(cl.Addrs(), ",")
	code, out, errOut := runCLI(t, "list", "--cluster", seeds, "--json")
	var all []lockStatus
	if code != 0 || json.Unmarshal([]byte(out), &all) != nil || len(all) != 6 || all[0].Key != "lock:{job-0}" {
		t.Fatalf("list --cluster: exit %d, %q %q", code, out, errOut)
	}
	if code, out, _ = runCLI(t, "status", "--cluster", seeds, "job-3"); code != 0 || !strings.Contains(out, "job-3: held by") {
		t.Fatalf("status --cluster: exit %d, %q", code, out)
	}
	if code, out, _ = runCLI(t, "reset-all", "--cluster", seeds, "--yes"); code != 0 || !strings.Contains(out, "reset 6 locks") {
		t.Fatalf("reset-all --cluster: exit %d, %q", code, out)
	}
}

// --verbose writes the lock's events to stderr, in text or JSON, with
// python-redis-lock's logger names; a waiting run says who held the lock;
// status and list name the holding process of a default owner id.
func TestVerboseAndHolder(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	url := "redis://" + s.Addr + "/0"
	holder, _ := redislock.New(s.Client(), "nightly", redislock.WithExpire(time.Minute))
	if err := holder.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())

	code, out, _ := runCLI(t, "status", "--redis", url, "nightly")
	if code != 0 || !strings.Contains(out, "(pid "+pid+" on ") {
		t.Fatalf("status: exit %d, %q; want the holder's pid %s", code, out, pid)
	}
	code, out, _ = runCLI(t, "status", "--redis", url, "--json", "nightly")
	var st lockStatus
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || strconv.Itoa(st.PID) != pid || st.Host == "" {
		t.Fatalf("status --json: exit %d, %q; want pid %s and a host", code, out, pid)
	}
	if code, out, _ = runCLI(t, "list", "--redis", url); code != 0 || !strings.Contains(out, "HOLDER") || !strings.Contains(out, "pid "+pid) {
		t.Fatalf("list: exit %d, %q", code, out)
	}

	// A run that waits for the holder, which is released meanwhile.
	go func() {
		// Once the run waits in BLPOP: it has logged who it waits for.
		for !strings.Contains(s.Client().Info(context.Background(), "clients").Val(), "blocked_clients:1") {
			time.Sleep(5 * time.Millisecond)
		}
		holder.Release(context.Background())
	}()
	code, _, errOut := runCLI(t, "run", "-v", "--log-format", "json", "--redis", url, "nightly", "--", "true")
	if code != 0 {
		t.Fatalf("run -v: exit %d, %q", code, errOut)
	}
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("run -v --log-format json: line %q is not JSON: %v", line, err)
		}
		lines = append(lines, m)
	}
	seen := map[string]bool{}
	for _, m := range lines {
		seen[m["logger"].(string)+" "+m["level"].(string)+" "+m["msg"].(string)] = true
		if m["msg"] == "waiting for lock" {
			h, _ := m["holder"].(map[string]any)
			if h["id"] != holder.ID() || fmt.Sprint(h["pid"]) != pid {
				t.Errorf("waiting line's holder = %v, want id %q and pid %s", m["holder"], holder.ID(), pid)
			}
		}
	}
	for _, want := range []string{
		"redis_lock.acquire DEBUG acquiring lock",
		"redis_lock.acquire INFO waiting for lock",
		"redis_lock.acquire INFO acquired lock",
		"redis_lock.refresh.start DEBUG starting renewal",
		"redis_lock.release DEBUG releasing lock",
		"redis_lock.refresh.shutdown DEBUG stopping renewal",
		"redis_lock.refresh.exit DEBUG renewal exited",
	} {
		if !seen[want] {
			t.Errorf("run -v: no line %q among %v", want, seen)
		}
	}

	// Text, and the admin commands; nothing without -v.
	if code, _, errOut = runCLI(t, "reset", "--verbose", "--redis", url, "nightly"); code != 0 || !strings.Contains(errOut, "logger=redis_lock.reset") {
		t.Fatalf("reset --verbose: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut = runCLI(t, "reset", "--redis", url, "nightly"); code != 0 || errOut != "" {
		t.Fatalf("reset without -v: exit %d, stderr %q; want nothing", code, errOut)
	}
	if code, _, errOut = runCLI(t, "status", "--log-format", "yaml", "--redis", url, "nightly"); code != exitUsage || !strings.Contains(errOut, "--log-format") {
		t.Fatalf("--log-format yaml: exit %d, %q; want a usage error", code, errOut)
	}
}
