package redislock_test

import (
	"flag"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/leakcheck"
)

// TestMain fails the package if any goroutine outlives the tests (see
// leakcheck.Run). With workerEnv set, the test binary is instead a worker process of the
// multi-process tests (see process_test.go).
func TestMain(m *testing.M) {
	if mode := os.Getenv(workerEnv); mode != "" {
		os.Exit(runWorker(mode))
	}
	// go-redis's log is a variable it reads unsynchronised: set it once,
	// before any client runs (see captureGoRedisLog).
	redis.SetLogger(goRedisLog)
	// The long tests (failovers, expiries, processes) mostly wait on their
	// own servers and run in parallel: four at a time unless -parallel says
	// otherwise (its default, GOMAXPROCS, is 2 here). -short skips them
	// and runs the quick ones in parallel instead (see quick), which wait
	// on timers far more than they compute: eight at a time.
	flag.Parse()
	if !flagSet("test.parallel") {
		n := "4"
		if testing.Short() {
			n = "8"
		}
		_ = flag.Set("test.parallel", n)
	}
	code := leakcheck.Run(m)
	if code != 0 {
		goRedisLog.printRecent()
	}
	os.Exit(code)
}

// verifyNoLeaks fails t if goroutines other than those of before are left,
// once the wait runtimes and key trackers are closed (a tracker that was stopping as the
// test stopped its server may have made go-redis retry a dial).
func verifyNoLeaks(t *testing.T, before goleak.Option) {
	t.Helper()
	redislock.Shutdown()
	if err := leakcheck.Find(before); err != nil {
		t.Error(err)
	}
}

// flagSet reports whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
