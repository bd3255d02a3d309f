package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-redis-lock/redislock/internal/redistest"
)

// Owner ids are stored byte for byte; one with a byte that is not UTF-8
// and control bytes, set by a raw SET, comes out of --json exactly (in
// owner_base64) and is Go-quoted by both status and list in text.
func TestOwnerBytes(t *testing.T) {
	s := redistest.Start(t)
	url := "redis://" + s.Addr + "/0"
	const (
		owner   = "id-\xff\x01\n\x1b[31mred"
		oddName = "odd\xfe\x07"
	)
	ctx := context.Background()
	s.Client().Set(ctx, "lock:weird", owner, 0)
	s.Client().Set(ctx, "lock:"+oddName, "plain-owner", 0)

	// decode checks one JSON status object against the owner and name.
	decode := func(t *testing.T, what string, obj map[string]any, name, owner string) {
		t.Helper()
		exact := func(field, want string) {
			got, _ := obj[field].(string)
			if b64, ok := obj[field+"_base64"].(string); ok {
				raw, err := base64.StdEncoding.DecodeString(b64)
				if err != nil {
					t.Fatalf("%s: %s_base64 %q: %v", what, field, b64, err)
				}
				got = string(raw)
			} else if !utf8.ValidString(want) {
				t.Errorf("%s: no %s_base64 for %q: %v", what, field, want, obj)
			}
			if got != want {
				t.Errorf("%s: %s = %q, want %q", what, field, got, want)
			}
		}
		exact("name", name)
		exact("key", "lock:"+name)
		exact("owner", owner)
	}

	code, out, errOut := runCLI(t, "status", "--redis", url, "--json", "weird")
	var obj map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &obj) != nil {
		t.Fatalf("status --json: exit %d, %q %q", code, out, errOut)
	}
	decode(t, "status --json", obj, "weird", owner)

	code, out, errOut = runCLI(t, "list", "--redis", url, "--json")
	var all []map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &all) != nil || len(all) != 2 {
		t.Fatalf("list --json: exit %d, %q %q", code, out, errOut)
	}
	for _, obj := range all {
		if obj["owner"] == "plain-owner" {
			decode(t, "list --json", obj, oddName, "plain-owner")
		} else {
			decode(t, "list --json", obj, "weird", owner)
		}
	}

	// Text: the owner quoted alike by status and list, and no raw control
	// byte or bad UTF-8 on the terminal.
	for _, args := range [][]string{{"status", "--redis", url, "weird"}, {"list", "--redis", url}} {
		code, out, _ := runCLI(t, args...)
		if code != exitOK || !strings.Contains(out, strconv.Quote(owner)) {
			t.Errorf("%s: exit %d, %q; want the owner as %s", args[0], code, out, strconv.Quote(owner))
		}
		if strings.ContainsAny(out, "\x01\x07\x1b") || !utf8.ValidString(out) {
			t.Errorf("%s prints raw bytes: %q", args[0], out)
		}
	}
	if _, out, _ := runCLI(t, "list", "--redis", url); !strings.Contains(out, strconv.Quote(oddName)) {
		t.Errorf("list does not quote the name %q: %q", oddName, out)
	}
}
