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
	blocked, stuck := make(chan struct{}), make(chan struct{})
	go func() {
		t.Run("blocked", func(t *testing.T) {
			close(blocked)
			stuckIn(stuck)
		})
	}()
	<-blocked
	var running []string
	for !slices.ContainsFunc(running, func(r string) bool { return strings.Contains(r, "in "+pkg+".stuckIn") }) {
		buf := make([]byte, 1<<20)
		running = Running(string(buf[:runtime.Stack(buf, true)]))
		runtime.Gosched()
	}
	close(stuck)
	close(parked)
	if len(running) != 2 || !strings.HasPrefix(running[0], "TestRunningNamesTheRunningTests ") ||
		!strings.HasPrefix(running[1], "TestRunningNamesTheRunningTests.func") {
		t.Fatalf("Running = %q, want this test and its blocked subtest", running)
	}
}

const pkg = "github.com/go-redis-lock/redislock/internal/leakcheck"

//go:noinline
func stuckIn(c chan struct{}) { <-c }
