//go:build unix

package redislock_test

import (
	"syscall"
	"time"
)

// processCPU is this process's user+sys CPU time so far; ok is false when
// it cannot be read.
func processCPU() (cpu time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
