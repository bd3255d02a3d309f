package main

import (
	"fmt"
	"strings"
	"testing"
)

// secret is the password in the URLs below; no output may show it.
const secret = "s3cret-Pw"

// Help shows the default URL, which comes from $REDIS_URL, without its
// password.
func TestHelpHidesPassword(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://user:"+secret+"@127.0.0.1:1/0")
	for _, cmd := range []string{"run", "status", "list", "reset", "reset-all", "check", "demo"} {
		code, out, errOut := runCLI(t, cmd, "--help")
		if code != exitOK {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		if strings.Contains(out+errOut, secret) {
			t.Errorf("%s --help shows the password:\n%s", cmd, errOut)
		}
		if cmd != "demo" && !strings.Contains(out, "redis://user:xxxxx@127.0.0.1:1/0") {
			t.Errorf("%s --help does not show the redacted default URL:\n%s", cmd, out)
		}
	}
	if _, out, errOut := runCLI(t, "help"); strings.Contains(out+errOut, secret) {
		t.Errorf("help shows the password")
	}
}

// A bad URL, given by flag or by $REDIS_URL, is reported without its
// password, by every command, however it is broken (including by the
// password itself). An unreachable server is too.
func TestErrorsHidePassword(t *testing.T) {
	badURLs := []string{
		"redis://user:" + secret + "@h:notaport/0",
		"redis://user:" + secret + "@h:6379/notadb",
		"redis://:" + secret + "@h:6379/0?bogus=1",
		"redis://user:" + secret + "@h:6379/0?dial_timeout=never",
		"redis://user:" + secret + "/x@h:6379/0",  // '/' in the password
		"redis://user:" + secret + "#x@h:6379/0",  // '#' in the password
		"redis://user:" + secret + "%zz@h:6379/0", // bad escape in the password
		"redis://user:" + secret + "@[::1/0",
		"http://user:" + secret + "@h:6379/0",
		"user:" + secret + "@h:6379", // no scheme
		"unix://user:" + secret + "@/tmp/x.sock?db=x",
	}
	commands := [][]string{
		{"run", "job", "--", "true"},
		{"status", "job"},
		{"list"},
		{"reset", "job"},
		{"reset-all", "--yes"},
		{"check"},
	}
	for _, raw := range badURLs {
		for _, c := range commands {
			args := append([]string{c[0], "--redis", raw}, c[1:]...)
			code, out, errOut := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(errOut, "bad --redis URL") || strings.Contains(out+errOut, secret) {
				t.Errorf("%q: exit %d, stderr %q; want %d, the error, and no password", args, code, errOut, exitUsage)
			}
		}
		code, out, errOut := runCLI(t, "demo", "--redis", raw)
		if code != exitUsage || !strings.Contains(errOut, "bad --redis URL") || strings.Contains(out+errOut, secret) {
			t.Errorf("demo --redis %q: exit %d, stderr %q; want %d, the error, and no password", raw, code, errOut, exitUsage)
		}
	}
	t.Run("from REDIS_URL", func(t *testing.T) {
		t.Setenv("REDIS_URL", badURLs[0])
		code, out, errOut := runCLI(t, "status", "job")
		if code != exitUsage || strings.Contains(out+errOut, secret) {
			t.Errorf("status with a bad $REDIS_URL: exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		code, out, errOut := runCLI(t, "status", "--redis", "redis://user:"+secret+"@127.0.0.1:1/0", "job")
		if code != exitFail || strings.Contains(out+errOut, secret) {
			t.Errorf("status on an unreachable server: exit %d, stderr %q", code, errOut)
		}
	})
}

// --redis takes an address without a scheme as redis-cli users write it:
// host, host:port, host:port/db; a socket path or a user name still needs
// its scheme.
func TestRedisAddressWithoutScheme(t *testing.T) {
	for raw, want := range map[string]string{
		"127.0.0.1":        "127.0.0.1:6379 db 0",
		"127.0.0.1:6430":   "127.0.0.1:6430 db 0",
		"localhost:6430/2": "localhost:6430 db 2",
	} {
		o, err := parseRedisURL(raw)
		if err != nil || fmt.Sprintf("%s db %d", o.Addr, o.DB) != want {
			t.Errorf("parseRedisURL(%q) = %v, %v; want %s", raw, o, err, want)
		}
	}
	for _, raw := range []string{"/tmp/redis.sock", "user@127.0.0.1:6379"} {
		if _, err := parseRedisURL(raw); err == nil {
			t.Errorf("parseRedisURL(%q) = nil error; want it refused without a scheme", raw)
		}
	}
}
