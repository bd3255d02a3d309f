package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock/internal/redistest"
)

// running reports whether pid is a live process: it exists and is not a
// zombie waiting to be reaped.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && !bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z"))
}

// readPID waits for COMMAND to write its pid to file, failing t after 10 s.
func readPID(t *testing.T, file string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, err := os.ReadFile(file); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("pid file holds %q", data)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("COMMAND wrote no pid to %s within 10s", file)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// redislock killed with SIGKILL takes COMMAND with it: COMMAND must not go
// on once nothing renews the lock, or a second holder would run beside it
// when the key expires.
func TestRunKilledKillsCommand(t *testing.T) {
	s := redistest.Start(t)
	url := "redis://" + s.Addr + "/0"
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The pid is written whole (rename), then the shell becomes sleep.
	cmd := cliCmd(t, "run", "--redis", url, "--expire", "2s", "job", "--",
		"sh", "-c", `echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 60`, pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPID(t, pidFile)
	t.Cleanup(func() {
		if running(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !running(pid) {
		t.Fatalf("COMMAND (pid %d) is not running before redislock is killed", pid)
	}
	killed := time.Now()
	cmd.Process.Kill()
	cmd.Wait()
	for running(pid) {
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("COMMAND (pid %d) still running 10s after redislock was killed with SIGKILL", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("redislock killed -> COMMAND gone: %v", time.Since(killed))
}
