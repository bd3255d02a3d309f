package main

import "syscall"

// serverAttr starts redis-server in a session of its own (see startRedis),
// killed when the bench dies: a Ctrl-C at the terminal no longer reaches
// it through the bench's process group. (Pdeathsig fires when the thread
// that started it ends; the Go runtime ends no thread but one locked to a
// goroutine that exits, which startRedis's caller is not.)
func serverAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}
