package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// ptyOut collects what a process writes to a pseudo-terminal.
type ptyOut struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func (o *ptyOut) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// terminalSession is a process started as the leader of a new session whose
// controlling terminal is a fresh pseudo-terminal, as a login shell is.
type terminalSession struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	out    *ptyOut
	read   chan struct{} // closed when the reader is done
	exited chan struct{} // closed when cmd has been waited for
}

// ioctl runs an ioctl with a pointer argument on f without taking f out
// of the runtime poller (as f.Fd would).
func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// openPTY opens a pseudo-terminal pair: posix_openpt, unlockpt, ptsname.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var unlock int32
	var n uint32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		master.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		master.Close()
		t.Fatalf("ptsname: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Fatalf("open the pty's terminal: %v", err)
	}
	return master, slave
}

// startInTerminal starts cmd as a session leader with a new pseudo-terminal
// as its controlling terminal and its standard input, output and error.
// With tostop, background writes to the terminal are stopped (stty tostop).
// The session is killed and reaped when t ends, if need be.
func startInTerminal(t *testing.T, cmd *exec.Cmd, tostop bool) *terminalSession {
	t.Helper()
	master, slave := openPTY(t)
	if tostop {
		var tio syscall.Termios
		if err := ioctl(slave, syscall.TCGETS, unsafe.Pointer(&tio)); err != nil {
			t.Fatal(err)
		}
		tio.Lflag |= syscall.TOSTOP
		if err := ioctl(slave, syscall.TCSETS, unsafe.Pointer(&tio)); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err := cmd.Start()
	slave.Close()
	if err != nil {
		master.Close()
		t.Fatal(err)
	}
	s := &terminalSession{t: t, master: master, cmd: cmd, out: &ptyOut{changed: make(chan struct{})},
		read: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(s.read)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			s.out.mu.Lock()
			s.out.buf.Write(b[:n])
			close(s.out.changed)
			s.out.changed = make(chan struct{})
			s.out.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
		master.Close()
		<-s.read
	})
	return s
}

// write types text on the terminal.
func (s *terminalSession) write(text string) {
	s.t.Helper()
	if _, err := s.master.Write([]byte(text)); err != nil {
		s.t.Fatalf("write to the terminal: %v", err)
	}
}

// waitFor waits until the terminal has shown want, failing after 10 s.
func (s *terminalSession) waitFor(want string) {
	s.t.Helper()
	s.waitForN(want, 1)
}

// waitForN waits until the terminal has shown want n times, failing after
// 10 s.
func (s *terminalSession) waitForN(want string, n int) {
	s.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		s.out.mu.Lock()
		seen, changed := strings.Count(s.out.buf.String(), want) >= n, s.out.changed
		s.out.mu.Unlock()
		if seen {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			s.t.Fatalf("the terminal did not show %q %d times within 10s; it shows:\n%s", want, n, s.out)
		}
	}
}

// waitForeground waits until the terminal's foreground process group is
// led by a process named comm, failing after 10 s.
func (s *terminalSession) waitForeground(comm string) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pgrp int32
		if err := ioctl(s.master, syscall.TIOCGPGRP, unsafe.Pointer(&pgrp)); err == nil {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pgrp)); err == nil && strings.TrimSpace(string(b)) == comm {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s did not get the terminal within 10s; the terminal shows:\n%s", comm, s.out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitReading waits until comm, the leader of the terminal's foreground
// group, is blocked reading its standard input (read(0, ...), as
// /proc/PID/syscall shows). A shell's trap for a signal that arrives just
// before its read() starts runs only once that read returns (dash looks
// for pending traps when read fails with EINTR), so a Ctrl-C typed as soon
// as the shell printed its prompt line could wait for a line that never
// comes: a race in the shell, not in redislock.
func (s *terminalSession) waitReading(comm string) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pgrp int32
		if err := ioctl(s.master, syscall.TIOCGPGRP, unsafe.Pointer(&pgrp)); err == nil {
			name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pgrp))
			call, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pgrp))
			if strings.TrimSpace(string(name)) == comm && strings.HasPrefix(string(call), "0 0x0 ") {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s did not block reading the terminal within 10s; the terminal shows:\n%s", comm, s.out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for the session leader to exit, failing after 10 s, and
// returns its exit code and how long it took.
func (s *terminalSession) wait() (int, time.Duration) {
	s.t.Helper()
	start := time.Now()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("still running 10s on; the terminal shows:\n%s", s.out)
	}
	return s.cmd.ProcessState.ExitCode(), time.Since(start)
}
