package redislock_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/go-redis-lock/redislock"
)

// TestMain fails the package if any goroutine outlives the tests, once the
// key trackers (which keep idle connections for the next hold) are closed.
// With workerEnv set, the test binary is instead a worker process of the
// multi-process tests (see process_test.go).
func TestMain(m *testing.M) {
	if mode := os.Getenv(workerEnv); mode != "" {
		os.Exit(runWorker(mode))
	}
	code := m.Run()
	redislock.CloseTrackers()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
