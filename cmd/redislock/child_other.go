//go:build !linux

package main

import (
	"os"
	"syscall"
)

// childAttr returns COMMAND's process attributes: a process group of its
// own. Outside Linux, COMMAND is not tied to redislock's life, nor given
// the terminal.
func childAttr(*terminal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// terminal stands for redislock's controlling terminal, which COMMAND gets
// only on Linux; elsewhere it is always nil, and its methods do nothing.
type terminal struct{}

func controllingTerminal(*os.File) *terminal { return nil }

func (*terminal) reclaim(int) {}

func (*terminal) watch() (<-chan os.Signal, func()) { return nil, func() {} }

func (*terminal) jobControl(_ os.Signal, _ int, suspended bool) bool { return suspended }
