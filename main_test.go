package redislock_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests. With
// workerEnv set, the test binary is instead a worker process of the
// multi-process tests (see process_test.go).
func TestMain(m *testing.M) {
	if mode := os.Getenv(workerEnv); mode != "" {
		os.Exit(runWorker(mode))
	}
	goleak.VerifyTestMain(m)
}
