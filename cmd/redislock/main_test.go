package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/go-redis-lock/redislock/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
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

func TestCLIErrors(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{nil, exitUsage, "Usage"},
		{[]string{"bogus"}, exitUsage, `unknown command "bogus"`},
		{[]string{"demo", "--workers", "0"}, exitUsage, "--workers"},
		{[]string{"demo", "--rounds", "-1"}, exitUsage, "--rounds"},
		{[]string{"demo", "--hold", "2s", "--expire", "1s"}, exitUsage, "--expire"},
		{[]string{"demo", "--nope"}, exitUsage, "flag provided but not defined"},
		{[]string{"demo", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"demo", "--redis", "http://x"}, exitUsage, "bad --redis URL"},
		{[]string{"demo", "--redis", "redis://127.0.0.1:1/0"}, exitFail, "cannot reach Redis at 127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tt.wantCode, tt.wantErr)
			}
			if tt.wantCode == exitFail && strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("unreachable server printed more than one line:\n%s", errOut)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	if code, out, _ := runCLI(t, "help"); code != exitOK || !strings.Contains(out, "redislock demo") {
		t.Fatalf("help: exit %d, %q", code, out)
	}
	if code, out, _ := runCLI(t, "version"); code != exitOK || !strings.HasPrefix(out, "redislock ") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
	if code, _, errOut := runCLI(t, "demo", "--help"); code != exitOK || !strings.Contains(errOut, "Examples:") {
		t.Fatalf("demo --help: exit %d, %q", code, errOut)
	}
}
