package leakcheck

import (
	"runtime"
	"slices"
	"strings"
	"testing"
)

// A hang report names the tests that are running, with the function each
// is blocked in, and not those waiting for their turn to run in parallel.
func TestRunningNamesTheRunningTests(t *testing.T) {
	parked := make(chan struct{})
	t.Run("waiting", func(t *testing.T) {
		t.Parallel() // runs only once the parent returns
		<-parked
	})
	var running []string
	t.Run("blocked", func(t *testing.T) {
		stuck := make(chan struct{})
		go func() { // reads the stacks while this subtest is blocked in stuckIn
			defer close(stuck)
			for !slices.ContainsFunc(running, func(r string) bool { return strings.Contains(r, "in "+pkg+".stuckIn") }) {
				buf := make([]byte, 1<<20)
				running = Running(string(buf[:runtime.Stack(buf, true)]))
				runtime.Gosched()
			}
		}()
		stuckIn(stuck)
	})
	close(parked)
	if len(running) != 2 || !strings.HasPrefix(running[0], "TestRunningNamesTheRunningTests ") ||
		!strings.HasPrefix(running[1], "TestRunningNamesTheRunningTests.func") {
		t.Fatalf("Running = %q, want this test and its blocked subtest", running)
	}
}

const pkg = "github.com/go-redis-lock/redislock/internal/leakcheck"

//go:noinline
func stuckIn(c chan struct{}) { <-c }

// go-redis's dial retries are ignored only beside a rebuilt sentinel's
// listener: a pool of ours left unclosed, retrying its dials, is a leak.
func TestDialRetriesAreIgnoredOnlyBesideARebuiltSentinel(t *testing.T) {
	dial := "goroutine 7 [sleep]:\ntime.Sleep(0x3b9aca00)\n\t/go/src/runtime/time.go:1 +0x1\ngithub.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial(0xc0)\n\t/x/pool.go:1 +0x1\n"
	listener := "goroutine 9 [chan receive]:\n" + sentinelListener + "(0xc0, 0xc1)\n\t/x/sentinel.go:1 +0x1\n"
	if sentinelRebuilt(dial) {
		t.Fatal("a lone dial retry is taken for a rebuilt sentinel's")
	}
	if !sentinelRebuilt(dial + "\n" + listener) {
		t.Fatal("a rebuilt sentinel's listener is not seen")
	}
}
