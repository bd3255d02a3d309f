package main

import "syscall"

// serverAttr starts redis-server in a session of its own (see startRedis),
// killed when the bench dies: a Ctrl-C at the terminal no longer reaches
// it through the bench's process group.
func serverAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}
