//go:build !unix

package redislock_test

import "time"

func processCPU() (cpu time.Duration, ok bool) { return 0, false }
