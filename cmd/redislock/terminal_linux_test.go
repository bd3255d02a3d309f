package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// From a terminal, COMMAND has the terminal while it runs: it reads it,
// Ctrl-C reaches it, redislock's signals and a lost lock still end it, and
// redislock has the terminal back to write once COMMAND is done.
func TestRunInTerminal(t *testing.T) {
	s := redistest.Start(t)
	url := "redis://" + s.Addr + "/0"
	run := func(t *testing.T, tostop bool, args ...string) *terminalSession {
		t.Helper()
		name := strings.ReplaceAll(t.Name(), "/", "-")
		return startInTerminal(t, cliCmd(t, append([]string{"run", "--redis", url, name, "--"}, args...)...), tostop)
	}

	t.Run("reads a line", func(t *testing.T) {
		ts := run(t, false, "sh", "-c", `echo ready; read a; echo "got:$a"`)
		ts.waitFor("ready")
		ts.write("hello\n")
		ts.waitFor("got:hello")
		if code, _ := ts.wait(); code != 0 {
			t.Fatalf("exit %d, want 0; the terminal shows:\n%s", code, ts.out)
		}
	})

	// Ctrl-C reaches COMMAND, whether it reads the terminal or not, and
	// redislock exits with COMMAND's 130 (not with its own: the message of
	// an interrupted redislock does not appear). A COMMAND that handles
	// SIGINT must be able to run its handler: it is not stopped.
	for _, tc := range []struct{ name, script, want string }{
		{"Ctrl-C while reading", `trap 'echo got-int; exit 130' INT; echo ready; read a`, "got-int"},
		{"Ctrl-C while sleeping", `echo ready; exec sleep 60`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := run(t, false, "sh", "-c", tc.script)
			ts.waitFor("ready")
			if tc.want == "got-int" {
				ts.waitReading("sh") // see waitReading: the trap would wait for a line
			}
			ts.write("\x03")
			ts.waitFor(tc.want)
			code, took := ts.wait()
			t.Logf("Ctrl-C -> exit: %v", took)
			if code != 130 || strings.Contains(ts.out.String(), "interrupted") {
				t.Fatalf("exit %d, want 130 from COMMAND; the terminal shows:\n%s", code, ts.out)
			}
		})
	}

	// Without a job-control shell above it (its parent, the test, is in
	// another session), redislock cannot be stopped with COMMAND; Ctrl-Z
	// stops COMMAND alone, and redislock resumes it rather than leave the
	// terminal hung.
	t.Run("Ctrl-Z without job control", func(t *testing.T) {
		ts := run(t, false, "sh", "-c", `echo ready; read a; echo "got:$a"`)
		ts.waitFor("ready")
		ts.write("\x1a")
		ts.write("hello\n")
		ts.waitFor("got:hello")
		if code, _ := ts.wait(); code != 0 {
			t.Fatalf("exit %d, want 0; the terminal shows:\n%s", code, ts.out)
		}
	})

	t.Run("SIGTERM to redislock", func(t *testing.T) {
		ts := run(t, false, "sh", "-c", `echo ready; exec cat`)
		ts.waitFor("ready")
		ts.cmd.Process.Signal(syscall.SIGTERM)
		if code, _ := ts.wait(); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit %d, want %d; the terminal shows:\n%s", code, 128+int(syscall.SIGTERM), ts.out)
		}
	})

	// With tostop, redislock could not write its message about the loss
	// unless it had the terminal back.
	t.Run("lost lock", func(t *testing.T) {
		ts := startInTerminal(t, cliCmd(t, "run", "--redis", url, "--expire", "600ms", "lostjob", "--",
			"sh", "-c", `trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done`), true)
		ts.waitFor("ready")
		s.Client().Del(context.Background(), "lock:lostjob")
		ts.waitFor("got-term")
		ts.waitFor("lost")
		if code, _ := ts.wait(); code != exitLost {
			t.Fatalf("exit %d, want %d; the terminal shows:\n%s", code, exitLost, ts.out)
		}
	})
}

// Under an interactive shell with job control, Ctrl-Z stops COMMAND and
// redislock as one job; bg resumes it in the background, where COMMAND's
// read from the terminal stops the job again; fg resumes COMMAND with the
// terminal.
func TestRunInTerminalJobControl(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	s := redistest.Start(t)
	url := "redis://" + s.Addr + "/0"
	shell := exec.Command(bash, "--norc", "--noprofile", "-i")
	shell.Env = append(os.Environ(), "PS1=prompt$ ", "HISTFILE=/dev/null", asMainEnv+"=1")
	ts := startInTerminal(t, shell, false)
	ts.waitFor("prompt$ ")
	// The markers are quoted apart so that the echo of the command line
	// does not show them.
	ts.write("'" + os.Args[0] + "' run --redis " + url + ` job -- sh -c 'echo re""ady; read a; echo "got"":$a"'` + "\n")
	ts.waitFor("ready")
	ts.waitForeground("sh")
	ts.write("\x1a")
	ts.waitFor("Stopped")
	ts.waitForeground("bash")
	// In the background, COMMAND's read stops it and the job, with SIGTTIN
	// (set -b: bash tells at once).
	ts.write("set -b; bg\n")
	ts.waitForN("Stopped", 2)
	ts.waitForeground("bash")
	ts.write("fg\n")
	ts.waitForeground("sh")
	ts.write("hello\n")
	ts.waitFor("got:hello")
	ts.write("echo rc\"\"=$?\n")
	ts.waitFor("rc=0")
	if n := s.Client().Exists(context.Background(), "lock:job").Val(); n != 0 {
		t.Fatal("lock left held after the job")
	}
	ts.write("exit\n")
	if code, _ := ts.wait(); code != 0 {
		t.Fatalf("shell exit %d; the terminal shows:\n%s", code, ts.out)
	}
}

// reset-all asks on a terminal, and resets on "y".
func TestResetAllAsksOnTerminal(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	url := "redis://" + s.Addr + "/0"
	l, _ := redislock.New(s.Client(), "a", redislock.WithID("owner-a"))
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	ts := startInTerminal(t, cliCmd(t, "reset-all", "--redis", url), false)
	ts.waitFor("[y/N]")
	ts.write("y\n")
	ts.waitFor("reset 1 locks")
	if code, _ := ts.wait(); code != 0 {
		t.Fatalf("exit %d; the terminal shows:\n%s", code, ts.out)
	}
	if s.Client().Exists(ctx, "lock:a").Val() != 0 {
		t.Fatal("reset-all answered y left the lock")
	}
}

// reset-all with /dev/null as standard input, as cron and systemd give it,
// does not ask (there is no one to answer): without --yes it resets
// nothing and exits 2, saying to pass --yes.
func TestResetAllDevNull(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	url := "redis://" + s.Addr + "/0"
	l, _ := redislock.New(s.Client(), "a", redislock.WithID("owner-a"))
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	cmd := cliCmd(t, "reset-all", "--redis", url)
	cmd.Stdin = devNull
	var stdout strings.Builder
	cmd.Stdout = &stdout
	code, errOut := exitOf(t, cmd)
	if code != exitUsage || !strings.Contains(errOut, "--yes") || strings.Contains(stdout.String(), "[y/N]") {
		t.Fatalf("reset-all < /dev/null: exit %d, stdout %q, stderr %q; want %d, no question, and a word about --yes",
			code, stdout.String(), errOut, exitUsage)
	}
	if s.Client().Exists(ctx, "lock:a").Val() != 1 {
		t.Fatal("reset-all < /dev/null reset the lock")
	}
	cmd = cliCmd(t, "reset-all", "--redis", url, "--yes")
	cmd.Stdin = devNull
	if code, errOut := exitOf(t, cmd); code != exitOK || s.Client().Exists(ctx, "lock:a").Val() != 0 {
		t.Fatalf("reset-all --yes < /dev/null: exit %d, %q; want the lock reset", code, errOut)
	}
}
