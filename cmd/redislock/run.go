package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-redis-lock/redislock"
)

const runHelp = `Usage: redislock run [flags] NAME -- COMMAND [ARGS...]

Takes the lock NAME (waiting for it unless --no-wait), runs COMMAND while
keeping the lock renewed, releases it when COMMAND exits and exits with
COMMAND's exit code. Like flock(1), across every host that uses the same
Redis; compatible with python-redis-lock's lock:NAME keys.

COMMAND runs in a process group of its own. SIGINT, SIGTERM and SIGHUP sent
to redislock are passed on to that group, and the lock is released once
COMMAND has exited. If the lock is lost while COMMAND runs (its key was
deleted or taken, or Redis could not be reached before the expire ran out),
the group gets SIGTERM, then SIGKILL after --kill-after, and redislock exits
with code 69.

Exit codes:
  COMMAND's    when COMMAND ran and the lock held throughout (128+N if it
               was killed by signal N)
  75           the lock is busy: with --no-wait, or --wait ran out
               (change it with --conflict-exit-code)
  69           the lock was lost while COMMAND ran
  1            Redis unreachable, a Redis error, interrupted while waiting
  2            bad flags or arguments (nothing was sent to Redis)
  126, 127     COMMAND could not be run, or was not found

Examples:
  # crontab: one host runs the nightly job, the others skip it
  17 3 * * *  redislock run --no-wait nightly -- /usr/local/bin/nightly-job
  # wait up to ten minutes for the lock, give the job an hour at most
  redislock run --wait 10m --max-hold 1h reindex -- ./reindex.sh --full
`

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		conn       connFlags
		noWait     bool
		wait       time.Duration
		expire     time.Duration
		maxHold    time.Duration
		id         string
		busyCode   int
		killAfter  time.Duration
		signalWait time.Duration
	)
	fs := newFlagSet("run", runHelp, stderr)
	conn.register(fs)
	fs.BoolVar(&noWait, "no-wait", false, "fail at once (exit 75) if the lock is busy")
	fs.BoolVar(&noWait, "n", false, "short for --no-wait")
	fs.DurationVar(&wait, "wait", 0, "give up (exit 75) after waiting this long; 0: wait as long as it takes")
	fs.DurationVar(&wait, "w", 0, "short for --wait")
	fs.DurationVar(&expire, "expire", 30*time.Second, "the lock's expire; it is renewed every 2/3 of it while COMMAND runs")
	fs.DurationVar(&maxHold, "max-hold", 0, "stop renewing after this long, so COMMAND is terminated; 0: no limit")
	fs.StringVar(&id, "id", "", "owner id stored in the lock (default: a random UUID)")
	fs.IntVar(&busyCode, "conflict-exit-code", exitBusy, "exit code when the lock is busy")
	fs.IntVar(&busyCode, "E", exitBusy, "short for --conflict-exit-code")
	fs.DurationVar(&killAfter, "kill-after", 10*time.Second, "after a lost lock, SIGKILL COMMAND this long after SIGTERM")
	fs.DurationVar(&signalWait, "release-timeout", 5*time.Second, "how long the final release may take")
	pos, command, dashdash, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	switch {
	case !dashdash || len(command) == 0:
		return fail(stderr, "run", exitUsage, errors.New("missing -- COMMAND [ARGS...] after the lock name"))
	case len(pos) != 1:
		return fail(stderr, "run", exitUsage, fmt.Errorf("want exactly one lock NAME before --, got %d arguments", len(pos)))
	case noWait && wait != 0:
		return fail(stderr, "run", exitUsage, errors.New("--no-wait and --wait exclude each other"))
	case wait < 0 || killAfter < 0 || signalWait <= 0:
		return fail(stderr, "run", exitUsage, errors.New("--wait, --kill-after and --release-timeout must not be negative"))
	case busyCode < 0 || busyCode > 255:
		return fail(stderr, "run", exitUsage, errors.New("--conflict-exit-code must be between 0 and 255"))
	}
	name := pos[0]
	opts := []redislock.Option{redislock.WithKeyPrefix(conn.prefix), redislock.WithExpire(expire), redislock.WithAutoRenewal()}
	if flagSet(fs, "id") {
		opts = append(opts, redislock.WithID(id))
	}
	if maxHold != 0 {
		opts = append(opts, redislock.WithMaxHold(maxHold))
	}
	client, where, err := conn.client()
	if err != nil {
		return fail(stderr, "run", exitUsage, err)
	}
	defer client.Close()
	// New checks every argument before the first byte goes to Redis.
	lock, err := redislock.New(client, name, opts...)
	if err != nil {
		return fail(stderr, "run", exitUsage, err)
	}
	if err := check(ctx, client, where); err != nil {
		return fail(stderr, "run", exitFail, err)
	}

	// Signals: while waiting they end the wait; while COMMAND runs they are
	// passed on to it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	if wait > 0 {
		actx, cancel = context.WithTimeout(actx, wait)
		defer cancel()
	}
	// A signal while waiting ends the wait. The watcher is joined before
	// COMMAND starts, so it cannot swallow a signal meant for COMMAND; a
	// signal that raced with a successful acquire is honoured: COMMAND
	// does not start.
	interrupted := make(chan os.Signal, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case s := <-sigs:
			interrupted <- s
			cancel()
		case <-actx.Done():
		}
	}()
	if noWait {
		err = lock.TryAcquire(actx)
	} else {
		err = lock.Acquire(actx)
	}
	cancel()
	<-watched
	select {
	case sig := <-interrupted:
		if err == nil {
			lock.Release(context.WithoutCancel(ctx))
			return fail(stderr, "run", 128+int(sig.(syscall.Signal)), fmt.Errorf("interrupted (%v) before COMMAND started; lock released", sig))
		}
	default:
	}
	switch {
	case err == nil:
	case errors.Is(err, redislock.ErrLocked) && (noWait || errors.Is(err, context.DeadlineExceeded)):
		owner, _ := lock.OwnerID(context.WithoutCancel(ctx))
		return fail(stderr, "run", busyCode, fmt.Errorf("lock %q is busy (held by %q)", name, owner))
	case errors.Is(err, redislock.ErrLocked):
		return fail(stderr, "run", exitFail, fmt.Errorf("interrupted while waiting for lock %q", name))
	default:
		return fail(stderr, "run", exitFail, err)
	}

	code, lostErr := runHolding(lock, command, sigs, killAfter, stdout, stderr)

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), signalWait)
	defer rcancel()
	relErr := lock.Release(rctx)
	switch {
	case lostErr != nil:
		return fail(stderr, "run", exitLost, fmt.Errorf("%v while COMMAND ran; COMMAND was terminated", lostErr))
	case errors.Is(relErr, redislock.ErrNotAcquired):
		return fail(stderr, "run", exitLost, fmt.Errorf("lock %q was lost before COMMAND finished", name))
	case relErr != nil:
		fmt.Fprintf(stderr, "redislock run: %v (the lock expires on its own)\n", relErr)
	}
	return code
}

// runHolding runs command while lock is held and returns its exit code,
// and the loss if the lock was lost meanwhile (command was then
// terminated).
func runHolding(lock *redislock.Lock, command []string, sigs <-chan os.Signal, killAfter time.Duration, stdout, stderr io.Writer) (code int, lost error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "redislock run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound, nil
		}
		return exitCannotRun, nil
	}
	group := -cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	done := lock.Done()
	var kill <-chan time.Time
	for {
		select {
		case err := <-exited:
			return exitCode(cmd, err), lost
		case sig := <-sigs:
			syscall.Kill(group, sig.(syscall.Signal))
		case <-done:
			done = nil
			lost = lock.Err()
			syscall.Kill(group, syscall.SIGTERM)
			kill = time.After(killAfter)
		case <-kill:
			syscall.Kill(group, syscall.SIGKILL)
		}
	}
}

// exitCode is the shell's view of how cmd ended: its exit status, or
// 128+N when signal N killed it.
func exitCode(cmd *exec.Cmd, err error) int {
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if err != nil && cmd.ProcessState == nil {
		return exitCannotRun
	}
	return cmd.ProcessState.ExitCode()
}
