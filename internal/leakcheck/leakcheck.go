// Package leakcheck finds goroutines that outlive a test package's tests,
// for its TestMain.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/go-redis-lock/redislock"
)

// Run runs m's tests and then, when they passed, fails the run if any
// goroutine is left, once the wait runtimes and key trackers are closed (a hold some test
// never released keeps its tracker retrying after the test stopped the
// server; see redislock.Shutdown). It returns the exit code.
func Run(m *testing.M) int {
	code := m.Run()
	redislock.Shutdown()
	if code == 0 {
		if err := Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	return code
}

// Find is goleak.Find with a longer patience: go-redis keeps retrying a
// failed dial once a second until its pool is closed, so such a goroutine
// of a pool closed a moment ago may live up to a second more, and a
// tracker's goroutines run on a second after its last hold.
func Find(opts ...goleak.Option) error {
	opts = append(opts, goRedisSentinelRebuilt...)
	var err error
	for range 4 {
		if err = goleak.Find(opts...); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

// goRedisSentinelRebuilt are the goroutines of a failover client's sentinel
// that go-redis v9.0.0 rebuilds when a dial goes through the failover
// client after its Close (its sentinelFailover has no closed flag; v9.23
// has one): the +switch-master listener, the helpers of its
// PubSub.Channel (which this library never uses) and its pool's dial
// retries. The library's own goroutines are still found: they are none of
// these.
var goRedisSentinelRebuilt = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/redis/go-redis/v9.(*sentinelFailover).listen"),
	goleak.IgnoreTopFunction("github.com/redis/go-redis/v9.(*channel).initHealthCheck.func1"),
	goleak.IgnoreTopFunction("github.com/redis/go-redis/v9.(*channel).initMsgChan.func1"),
	goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
}
