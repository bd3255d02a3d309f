package redislock_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/go-redis-lock/redislock"
)

// TestMain fails the package if any goroutine outlives the tests, once the
// key trackers are closed: a hold some test never released keeps its
// tracker retrying after the test stopped the server.
// With workerEnv set, the test binary is instead a worker process of the
// multi-process tests (see process_test.go).
func TestMain(m *testing.M) {
	if mode := os.Getenv(workerEnv); mode != "" {
		os.Exit(runWorker(mode))
	}
	code := m.Run()
	redislock.CloseTrackers()
	if code == 0 {
		if err := findLeaks(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// findLeaks is goleak.Find with a longer patience: go-redis keeps retrying
// a failed dial once a second until its pool is closed, so such a
// goroutine of a pool closed a moment ago may live up to a second more.
func findLeaks(opts ...goleak.Option) error {
	var err error
	for range 4 {
		if err = goleak.Find(opts...); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

// verifyNoLeaks fails t if goroutines other than those of before are left,
// once the key trackers are closed (a tracker that was stopping as the
// test stopped its server may have made go-redis retry a dial).
func verifyNoLeaks(t *testing.T, before goleak.Option) {
	t.Helper()
	redislock.CloseTrackers()
	if err := findLeaks(before); err != nil {
		t.Error(err)
	}
}
