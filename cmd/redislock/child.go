package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// runHolding runs command while lock is held and returns its exit code,
// and the loss if the lock was lost meanwhile (command was then
// terminated). Signals received on sigs are passed on to command's process
// group. It returns once command has exited.
func runHolding(lock holdable, command []string, sigs <-chan os.Signal, killAfter time.Duration, stdout, stderr io.Writer) (code int, lost error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	tty := controllingTerminal(os.Stdin)
	cmd.SysProcAttr = childAttr(tty)
	jobSigs, stopJobSigs := tty.watch()
	defer stopJobSigs()
	exited, err := startTied(cmd)
	if err != nil {
		// A child that failed after taking the terminal has exited.
		tty.reclaim(0)
		fmt.Fprintf(stderr, "redislock run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound, nil
		}
		return exitCannotRun, nil
	}
	pid := cmd.Process.Pid // also its process group's id
	group := -pid

	var (
		done      = lock.Done()
		kill      <-chan time.Time
		suspended bool // redislock's group stopped itself because command was stopped
	)
	for {
		select {
		case err := <-exited:
			tty.reclaim(pid)
			return exitCode(cmd, err), lost
		case sig := <-sigs:
			syscall.Kill(group, sig.(syscall.Signal))
		case <-done:
			done = nil
			lost = lock.Err()
			syscall.Kill(group, syscall.SIGTERM)
			// A stopped command handles SIGTERM only once continued.
			syscall.Kill(group, syscall.SIGCONT)
			kill = time.After(killAfter)
		case <-kill:
			syscall.Kill(group, syscall.SIGKILL)
		case sig := <-jobSigs:
			suspended = tty.jobControl(sig, pid, suspended)
		}
	}
}

// startTied starts cmd and returns a channel that receives cmd.Wait's
// result. Where the child is tied to redislock's life (Pdeathsig, see
// childAttr), the kernel signals the child when the OS thread that started
// it ends, not when the process does; so cmd is started, and waited for,
// on a goroutine locked to its thread that never unlocks it: the thread
// lives until the child is reaped, and the runtime then ends it with the
// goroutine.
func startTied(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
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
