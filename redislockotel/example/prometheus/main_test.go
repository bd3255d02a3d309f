package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock/internal/leakcheck"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/redislockotel"
)

func TestMain(m *testing.M) {
	// leakcheck.Run, not goleak.VerifyTestMain with goleak.Cleanup: a
	// Cleanup replaces VerifyTestMain's os.Exit, and the leak's exit code
	// was dropped (the package passed with goroutines left).
	os.Exit(leakcheck.Run(m))
}

// The example serves the lock's metrics on /metrics over loopback HTTP, and
// a scrape finds every series, with their attributes as labels, with the
// lock name and without it (the default).
func TestScrapeFindsTheSeries(t *testing.T) {
	t.Run("name", func(t *testing.T) { testScrape(t, true) })
	t.Run("default", func(t *testing.T) { testScrape(t, false) })
}

func testScrape(t *testing.T, withName bool) {
	s := redistest.Start(t)
	var opts []redislockotel.Option
	if withName {
		opts = append(opts, redislockotel.WithLockName())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln, s.Client(), 3, opts...) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run() = %v", err)
		}
	}()

	want := []string{
		`redislock_acquire_duration_seconds_bucket{`,
		`redislock_mode="blocking"`,
		`redislock_result="acquired"`,
		`redislock_hold_duration_seconds_count{`,
		`redislock_held{`,
		`redislock_wakeups_total{`,
		`redislock_cause="signal"`,
		`redislock_extend_total{`,
		`redislock_renewal="manual"`,
	}
	if withName {
		want = append(want, `redislock_name="report"`)
	}

	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		body = scrape(t, "http://"+ln.Addr().String()+"/metrics")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the scrape after 10 s:\n%s", missing, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
