//go:build !linux

package main

import "syscall"

// serverAttr starts redis-server in a session of its own (see startRedis).
func serverAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
