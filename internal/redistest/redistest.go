// Package redistest starts real redis-server processes for tests, each on a
// free loopback port, and stops them when the test ends.
//
// When no redis-server binary is on PATH the tests that need one are
// skipped with a message saying how to install it, except when the
// environment has CI=true, where they fail: CI must run them.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process started by Start.
type Server struct {
	Addr string // host:port on 127.0.0.1

	t    testing.TB
	bin  string
	args []string
	dir  string
	env  []string // extra environment of the process, kept across Restart
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// Binary returns the path of redis-server: $REDISTEST_SERVER when set
// (another version's, see Versions), else the one on PATH; or skips t
// (fails it when CI=true) when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("REDISTEST_SERVER"); bin != "" {
		return bin
	}
	bin, err := exec.LookPath("redis-server")
	if err == nil {
		return bin
	}
	msg := "redis-server not found on PATH: install it (apt-get install redis-server) to run the real-server tests"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: these tests must run)")
	}
	t.Skip(msg)
	return ""
}

// Start starts a redis-server on a free loopback port with no persistence
// and the noeviction policy, extra directives appended ("maxmemory 1mb"),
// and stops it when t ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return launch(t, startArgs(extra))
}

// startArgs returns the arguments builder of Start: no persistence, the
// noeviction policy, then the extra directives.
func startArgs(extra []string) func(port int, dir string) ([]string, error) {
	return func(port int, dir string) ([]string, error) {
		return append([]string{
			"--bind", "127.0.0.1",
			"--port", strconv.Itoa(port),
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
			"--maxmemory-policy", "noeviction",
			"--protected-mode", "yes",
		}, directives(extra)...), nil
	}
}

// launch starts a redis-server with the arguments argsFor returns for a
// free loopback port and a fresh directory, trying other ports if the
// chosen one was taken meanwhile, and stops it when t ends.
func launch(t testing.TB, argsFor func(port int, dir string) ([]string, error)) *Server {
	t.Helper()
	return launchEnv(t, nil, argsFor)
}

// launchEnv is launch with env ("NAME=value") added to the process's
// environment, on this start and on every Restart.
func launchEnv(t testing.TB, env []string, argsFor func(port int, dir string) ([]string, error)) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), env: env}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			continue
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if s.args, err = argsFor(port, s.dir); err != nil {
			break
		}
		if err = s.start(); err == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redistest: could not start redis-server: %v", err)
	return nil
}

// directives turns "name value..." strings into --name value arguments.
func directives(extra []string) []string {
	var out []string
	for _, d := range extra {
		f := strings.Fields(d)
		if len(f) == 0 {
			continue
		}
		out = append(out, "--"+f[0])
		out = append(out, f[1:]...)
	}
	return out
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs the process and waits until it answers PING.
func (s *Server) start() error {
	cmd := exec.Command(s.bin, s.args...)
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...) // later entries win
	}
	logf, err := os.Create(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done

	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server exited at start: %s", s.logTail())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on %s did not answer PING: %v", s.Addr, err)
		}
	}
}

// logTail returns the last lines of the server's log.
func (s *Server) logTail() string {
	f, err := os.Open(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 5 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, " | ")
}

// Client returns a new client of the server with go-redis's defaults and
// opts applied, closed when the test ends.
func (s *Server) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.Addr}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	s.t.Cleanup(func() { c.Close() })
	return c
}

// Kill sends SIGKILL to the server and waits for it to exit. Safe to call
// more than once.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Restart starts the server again on the same port after Kill, with an
// empty dataset (nothing is persisted).
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond) // the port may linger for a moment
	}
	s.t.Fatalf("redistest: restart on %s: %v", s.Addr, err)
}

// Stop kills the server; it is registered with t.Cleanup by Start.
func (s *Server) Stop() { s.Kill() }

// BlockedClients returns INFO clients' blocked_clients of a real server.
func BlockedClients(t testing.TB, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "clients").Result()
	if err != nil {
		t.Fatalf("INFO clients: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "blocked_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatal("INFO clients has no blocked_clients")
	return 0
}

// WaitBlocked waits until n clients are blocked on the server (waiters
// are in BLPOP), failing the test after 10 s.
func WaitBlocked(t testing.TB, c *redis.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for BlockedClients(t, c) < n {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %d blocked clients, have %d", n, BlockedClients(t, c))
		}
		time.Sleep(time.Millisecond)
	}
}

// CommandHook is a redis.Hook made of one function, called for every
// command sent on its own (pipelines pass through untouched); it sends the
// command by calling next, or fails it without sending.
type CommandHook func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error

func (h CommandHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h CommandHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return h(ctx, cmd, next) }
}
func (h CommandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Quick marks a test that needs nothing process-wide, so that it runs in
// parallel with the others like it and with the long scenarios. They wait
// on timers and on their servers far more than they compute (the whole
// root package used a fifth of this 2-core machine's CPU when they ran one
// at a time). Under the race detector (CI's full run) it stays
// sequential: there each test costs several times the CPU, and a quick
// test's timing bound is not to compete with the long scenarios as well.
func Quick(t *testing.T) {
	t.Helper()
	if testing.Short() || !raceOn {
		t.Parallel()
	}
}

// StartProcess starts cmd with its standard output piped, and returns
// that output; the process is killed and waited for when t ends, if it
// has not exited by then.
func StartProcess(t testing.TB, cmd *exec.Cmd) *bufio.Reader {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return bufio.NewReader(out)
}
