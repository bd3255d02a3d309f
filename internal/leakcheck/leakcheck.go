// Package leakcheck finds goroutines that outlive a test package's tests,
// for its TestMain.
package leakcheck

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/go-redis-lock/redislock"
)

// Run runs m's tests and then, when they passed, fails the run if any
// goroutine is left, once the wait runtimes and key trackers are closed (a hold some test
// never released keeps its tracker retrying after the test stopped the
// server; see redislock.Shutdown). It returns the exit code.
//
// A run that would reach go test's -timeout is ended a little before it,
// with every goroutine's stack and then, last, the tests still running and
// what each waits in: a CI log shows its tail, and go test's own timeout
// report puts the names first, above thousands of lines of stacks.
func Run(m *testing.M) int {
	stop := reportHang()
	code := m.Run()
	stop()
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
// tracker's goroutines run on a second after its last hold. Each round
// starts with a garbage collection: the renewal of a holder dropped while
// holding ends when the holder is collected.
func Find(opts ...goleak.Option) error {
	opts = append(opts, goRedisSentinelRebuilt...)
	var err error
	for range 4 {
		// A holder dropped while holding (a test's Lock that went out of
		// scope) stops its renewal when it is collected (see
		// redislock.Lock): collect, so that its cleanup runs now.
		runtime.GC()
		o := opts
		if sentinelRebuilt(allStacks()) {
			o = append(o, rebuiltSentinelDials)
		}
		if err = goleak.Find(o...); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

// goRedisSentinelRebuilt are the goroutines of a failover client's sentinel
// that go-redis v9.0.0 rebuilds when a dial goes through the failover
// client after its Close (its sentinelFailover has no closed flag; v9.23
// has one): the +switch-master listener and the helpers of its
// PubSub.Channel (which this library never uses). The library's own
// goroutines are still found: they are none of these.
var goRedisSentinelRebuilt = []goleak.Option{
	goleak.IgnoreTopFunction(sentinelListener),
	// Anywhere in the stack: they sleep between rounds (time.Sleep on top).
	goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initHealthCheck.func1"),
	goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initMsgChan.func1"),
}

const sentinelListener = "github.com/redis/go-redis/v9.(*sentinelFailover).listen"

// rebuiltSentinelDials ignores go-redis's dial retries: the rebuilt
// sentinel's pool is never closed, so its dials retry for ever. It applies
// only while such a sentinel's listener runs (sentinelRebuilt): a retry of
// a pool of ours that was never closed is found otherwise.
var rebuiltSentinelDials = goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")

// sentinelRebuilt reports whether a dump of every goroutine's stack has a
// rebuilt sentinel's listener in it.
func sentinelRebuilt(stacks string) bool {
	return strings.Contains(stacks, "\n"+sentinelListener+"(")
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		if n := runtime.Stack(buf, true); n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// hangMargin is how long before go test's -timeout a hung run is reported.
const hangMargin = 20 * time.Second

// reportHang arms the report of a run that is about to time out, and
// returns the func that disarms it.
func reportHang() (stop func()) {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	timeout, err := time.ParseDuration(f.Value.String())
	if err != nil || timeout <= 2*hangMargin {
		return func() {}
	}
	t := time.AfterFunc(timeout-hangMargin, func() {
		buf := make([]byte, 16<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "%s\n", buf)
		fmt.Fprintf(os.Stderr, "leakcheck: the tests ran for %v, %v short of -test.timeout; still running:\n", timeout-hangMargin, hangMargin)
		for _, line := range Running(string(buf)) {
			fmt.Fprintf(os.Stderr, "\t%s\n", line)
		}
		os.Exit(2)
	})
	return func() { t.Stop() }
}

// testFrame matches a test function's frame in a goroutine's stack.
var testFrame = regexp.MustCompile(`^[\w./-]*?\.((?:Test|Example)[\w.]*)\(`)

// Running lists, from a dump of every goroutine's stack, each test
// function that is running and not waiting for its turn to run in
// parallel, with the innermost frame it is blocked in.
func Running(stacks string) []string {
	var out []string
	for _, g := range strings.Split(stacks, "\n\n") {
		lines := strings.Split(g, "\n")
		if len(lines) < 2 || !strings.Contains(g, "testing.tRunner(") ||
			strings.Contains(g, "testing.(*T).Parallel(") || strings.Contains(g, "testing.(*M).Run(") {
			continue
		}
		for _, l := range lines[1:] {
			if m := testFrame.FindStringSubmatch(l); m != nil {
				out = append(out, fmt.Sprintf("%s (goroutine %s in %s)", m[1],
					strings.TrimSuffix(strings.TrimPrefix(lines[0], "goroutine "), ":"), firstOwnFrame(lines[1:])))
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// firstOwnFrame is the innermost function of a goroutine's stack lines
// that is not the runtime's.
func firstOwnFrame(lines []string) string {
	for _, l := range lines {
		if l == "" || strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "runtime.") {
			continue
		}
		if i := strings.LastIndex(l, "("); i > 0 {
			l = l[:i]
		}
		return l
	}
	return "?"
}
