package main

import (
	"bytes"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"unsafe"
)

// childAttr returns COMMAND's process attributes: a process group of its
// own, whose id is COMMAND's pid; SIGKILL from the kernel when redislock
// dies (Pdeathsig: precisely, when the thread that started COMMAND ends,
// which startTied delays until COMMAND is reaped); and, when redislock's
// group is the foreground group of its controlling terminal tty, the
// terminal's foreground.
func childAttr(tty *terminal) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if tty.foreground() {
		attr.Foreground = true
		attr.Ctty = tty.fd // Foreground wants the parent's descriptor
		tty.handedOver = true
	}
	return attr
}

// terminal is redislock's controlling terminal, when its standard input is
// that terminal. COMMAND then gets the terminal whenever redislock's group
// has it, and job control (Ctrl-Z, fg, bg) treats redislock and COMMAND as
// one job although their process groups differ: see jobControl. The
// methods of a nil *terminal do nothing.
type terminal struct {
	fd         int  // redislock's standard input
	pgrp       int  // redislock's process group
	handedOver bool // the terminal was given to COMMAND's group once
}

// controllingTerminal returns f as redislock's controlling terminal, or nil
// when f is not a terminal, or a terminal that does not control redislock.
func controllingTerminal(f *os.File) *terminal {
	if !isTerminal(f) {
		return nil
	}
	fd := int(f.Fd())
	if _, err := tcgetpgrp(fd); err != nil {
		return nil
	}
	return &terminal{fd: fd, pgrp: syscall.Getpgrp()}
}

// foreground reports whether redislock's group is the terminal's
// foreground group.
func (t *terminal) foreground() bool {
	if t == nil {
		return false
	}
	fg, err := tcgetpgrp(t.fd)
	return err == nil && fg == t.pgrp
}

// handOver gives the terminal to COMMAND's group pgid if redislock's group
// has it, and reports whether COMMAND's group has it then. Outside the
// foreground it changes nothing: a shell that took the terminal keeps it.
func (t *terminal) handOver(pgid int) bool {
	fg, err := tcgetpgrp(t.fd)
	switch {
	case err != nil:
		return false
	case fg == t.pgrp:
		if tcsetpgrp(t.fd, pgid) != nil {
			return false
		}
		t.handedOver = true
		return true
	default:
		return fg == pgid
	}
}

// reclaim gives the terminal back to redislock's group once COMMAND has
// exited, if COMMAND's group pgid still has it, or, with pgid 0 (COMMAND
// failed to start after taking it), if it was handed over and another
// group has it. A shell that took the terminal meanwhile keeps it.
func (t *terminal) reclaim(pgid int) {
	if t == nil {
		return
	}
	fg, err := tcgetpgrp(t.fd)
	if err != nil || fg == t.pgrp || (pgid != 0 && fg != pgid) || (pgid == 0 && !t.handedOver) {
		return
	}
	// redislock's group is in the background: without ignoring SIGTTOU,
	// tcsetpgrp would stop it.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	tcsetpgrp(t.fd, t.pgrp)
}

// watch returns the channel of the signals jobControl handles, SIGCHLD and
// SIGCONT, and a func that stops them; without a terminal, a nil channel.
// Call it before COMMAND starts, so that no stop of COMMAND goes unseen.
func (t *terminal) watch() (<-chan os.Signal, func()) {
	if t == nil {
		return nil, func() {}
	}
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGCHLD, syscall.SIGCONT)
	return c, func() { signal.Stop(c) }
}

// jobControl handles one SIGCHLD or SIGCONT for COMMAND (pid, also its
// group's id), given whether redislock's group is stopped on its behalf,
// and returns that again.
//
// COMMAND stopped by SIGTSTP (Ctrl-Z), or by SIGTTIN or SIGTTOU (it used
// the terminal from the background), stops redislock's group with the same
// signal, so that the shell sees the job stop. When the shell resumes the
// group (fg, bg: SIGCONT), COMMAND gets the terminal if the group got it,
// and is resumed. COMMAND stopped for want of the terminal while
// redislock's group has it gets it and goes on. When no shell could resume
// redislock's group (it is orphaned), redislock does not stop: COMMAND goes
// on if it can have the terminal, and otherwise stays stopped.
func (t *terminal) jobControl(sig os.Signal, pid int, suspended bool) bool {
	switch sig {
	case syscall.SIGCHLD:
		stop, ok := stoppedBy(pid)
		if !ok || (stop != syscall.SIGTSTP && stop != syscall.SIGTTIN && stop != syscall.SIGTTOU) {
			return suspended
		}
		if stop != syscall.SIGTSTP && t.handOver(pid) {
			syscall.Kill(-pid, syscall.SIGCONT)
			return suspended
		}
		if groupResumable(t.pgrp) {
			syscall.Kill(-t.pgrp, stop)
			return true
		}
		if t.handOver(pid) {
			syscall.Kill(-pid, syscall.SIGCONT)
		}
		return suspended
	case syscall.SIGCONT:
		t.handOver(pid)
		if suspended {
			syscall.Kill(-pid, syscall.SIGCONT)
		}
		return false
	}
	return suspended
}

// siginfoFields is the offset of the union in a siginfo_t: after si_signo,
// si_errno and si_code, aligned to a pointer.
const siginfoFields = (12 + unsafe.Sizeof(uintptr(0)) - 1) &^ (unsafe.Sizeof(uintptr(0)) - 1)

// stoppedBy reports whether the child pid is stopped, and by which signal:
// waitid(P_PID, pid, WSTOPPED|WNOHANG), which consumes the stop report but
// neither waits nor reaps an exited child (cmd.Wait still does that).
func stoppedBy(pid int) (syscall.Signal, bool) {
	const (
		pPID       = 1 // waitid's idtype for one pid
		cldStopped = 5 // si_code of a child stopped by a signal
	)
	var info [128 / 4]int32 // a siginfo_t: si_signo, si_errno, si_code, then si_pid, si_uid, si_status
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)),
		syscall.WSTOPPED|syscall.WNOHANG, 0, 0)
	f := siginfoFields / 4
	if errno != 0 || info[2] != cldStopped || info[f] != int32(pid) {
		return 0, false
	}
	return syscall.Signal(info[f+2]), true
}

// groupResumable reports whether a job-control shell can resume the
// process group pgrp, redislock's, after it stops: whether the group is not
// orphaned. A group is orphaned when none of its members has a parent in
// another group of the same session, and the kernel then discards SIGTSTP,
// SIGTTIN and SIGTTOU sent to it. This follows redislock's ancestors out of
// the group: the group is resumable if the first ancestor outside it is in
// redislock's session. Another member could make the group resumable when
// redislock's ancestors do not; the answer is then false, and redislock
// does not stop, which is the safe side.
func groupResumable(pgrp int) bool {
	sid, err := getsid(0)
	if err != nil {
		return false
	}
	ppid := os.Getppid()
	for range 64 {
		if ppid <= 0 {
			return false
		}
		ppgrp, err := syscall.Getpgid(ppid)
		if err != nil {
			return false
		}
		if ppgrp != pgrp {
			psid, err := getsid(ppid)
			return err == nil && psid == sid
		}
		if ppid, err = parentOf(ppid); err != nil {
			return false
		}
	}
	return false
}

func getsid(pid int) (int, error) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(sid), nil
}

// parentOf returns the parent of pid, from /proc/PID/stat ("pid (comm)
// state ppid ...", where comm may hold spaces and parentheses).
func parentOf(pid int) (int, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, errors.New("bad /proc stat")
	}
	return strconv.Atoi(string(f[1]))
}
