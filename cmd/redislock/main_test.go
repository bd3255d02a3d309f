package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/go-redis-lock/redislock/internal/leakcheck"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// The test binary doubles as the redislock binary: with this variable set
// it runs main instead of the tests (see cliCmd).
const asMainEnv = "REDISLOCK_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		return
	}
	os.Exit(leakcheck.Run(m))
}

// quick is redistest.Quick.
var quick = redistest.Quick

// runCLI runs the command line in process, with an empty, non-terminal
// standard input.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestDemoInProcess(t *testing.T) {
	code, out, errOut := runCLI(t, "demo", "--workers", "4", "--rounds", "10")
	if code != exitOK {
		t.Fatalf("demo exit = %d, want 0; stderr: %s", code, errOut)
	}
	for _, want := range []string{"counter: 40, expected 40: no lost updates", "per acquisition", "acquisitions"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoRealServer(t *testing.T) {
	s := redistest.Start(t)
	code, out, errOut := runCLI(t, "demo", "--redis", "redis://"+s.Addr+"/0", "--workers", "6", "--rounds", "20")
	if code != exitOK {
		t.Fatalf("demo exit = %d, want 0; stderr: %s", code, errOut)
	}
	if !strings.Contains(out, "counter: 120, expected 120: no lost updates") {
		t.Fatalf("demo output:\n%s", out)
	}
	if keys := s.Client().Keys(context.Background(), "redislock-demo:*").Val(); len(keys) != 0 {
		t.Fatalf("demo left keys behind: %q", keys)
	}
}

func TestHelpAndVersion(t *testing.T) {
	if code, out, _ := runCLI(t, "help"); code != exitOK || !strings.Contains(out, "redislock run") || !strings.Contains(out, "* * *") {
		t.Fatalf("help: exit %d, %q", code, out)
	}
	if code, out, _ := runCLI(t, "version"); code != exitOK || !strings.HasPrefix(out, "redislock ") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
	for _, cmd := range []string{"run", "status", "list", "reset", "reset-all", "check", "demo"} {
		if code, out, _ := runCLI(t, cmd, "--help"); code != exitOK || !strings.Contains(out, "Usage: redislock "+cmd) {
			t.Fatalf("%s --help: exit %d, %q", cmd, code, out)
		}
	}
}
