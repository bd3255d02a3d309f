package wire

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestKeyScheme(t *testing.T) {
	tests := []struct {
		prefix              string
		tagged              bool
		name                string
		lock, signal, fence string
		pattern             string
	}{
		{"lock:", false, "reports", "lock:reports", "lock-signal:reports", "lock-fence:reports", "lock:*"},
		{"_mayan_lock:", false, "ocr", "_mayan_lock:ocr", "_mayan_lock-signal:ocr", "_mayan_lock-fence:ocr", "_mayan_lock:*"},
		{"app/locks/", false, "x", "app/locks/x", "app/locks/-signal:x", "app/locks/-fence:x", "app/locks/*"},
		{"l*[?]:", false, "x", "l*[?]:x", "l*[?]-signal:x", "l*[?]-fence:x", `l\*\[\?\]:*`},
		{"lock:", true, "reports", "lock:{reports}", "lock-signal:{reports}", "lock-fence:{reports}", "lock:{*}"},
	}
	for _, tt := range tests {
		ks := NewScheme(tt.prefix, tt.tagged)
		if got := ks.LockKey(tt.name); got != tt.lock {
			t.Errorf("lockKey(%q) = %q, want %q", tt.name, got, tt.lock)
		}
		if got := ks.SignalKey(tt.name); got != tt.signal {
			t.Errorf("signalKey(%q) = %q, want %q", tt.name, got, tt.signal)
		}
		if got := ks.FenceKey(tt.name); got != tt.fence {
			t.Errorf("fenceKey(%q) = %q, want %q", tt.name, got, tt.fence)
		}
		if got := ks.ScanPattern("*"); got != tt.pattern {
			t.Errorf("scanPattern(*) = %q, want %q", got, tt.pattern)
		}
		if got, ok := ks.NameOf(tt.lock); !ok || got != tt.name {
			t.Errorf("nameOf(%q) = %q, %v; want %q", tt.lock, got, ok, tt.name)
		}
		for _, other := range []string{tt.signal, tt.fence} {
			if got, ok := ks.NameOf(other); ok {
				t.Errorf("nameOf(%q) = %q, true; want not a lock key", other, got)
			}
		}
	}
	// A prefix whose signal prefix starts with it: signal keys are not locks.
	ks := NewScheme("lock", false)
	if _, ok := ks.NameOf("lock-signal:x"); ok {
		t.Error(`prefix "lock": nameOf("lock-signal:x") is a lock`)
	}
	if name, ok := ks.NameOf("lockx"); !ok || name != "x" {
		t.Errorf(`prefix "lock": nameOf("lockx") = %q, %v`, name, ok)
	}
	tagged := NewScheme("lock:", true)
	for _, key := range []string{"lock:x", "lock:{x", "lock:x}", "lock:{"} {
		if name, ok := tagged.NameOf(key); ok {
			t.Errorf("tagged nameOf(%q) = %q, true; want not a lock key", key, name)
		}
	}
	for _, bad := range []struct{ prefix, name string }{{"lock:", "a}b"}, {"lock:", "}"}, {"a{b}:", "x"}, {"a{:", "x"}} {
		if NewScheme(bad.prefix, true).TagSafe(bad.name) {
			t.Errorf("tagged TagSafe(prefix %q, name %q) = true, want false", bad.prefix, bad.name)
		}
		if !NewScheme(bad.prefix, false).TagSafe(bad.name) {
			t.Errorf("untagged TagSafe(prefix %q, name %q) = false, want true", bad.prefix, bad.name)
		}
	}
}

// FuzzKeyScheme: a lock key maps back to its name, and never reads as a
// lock key of the scheme when it is a signal or fence key.
func FuzzKeyScheme(f *testing.F) {
	f.Add("lock:", "reports", false)
	f.Add("lock", "-signal:x", false)
	f.Add("lock:", "{x}", true)
	f.Add("l*[?]\\:", "a\x00b", false)
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	// matches reports which of keys SCAN MATCH pattern finds, by Redis's
	// glob rules as miniredis implements them.
	matches := func(t *testing.T, pattern string, keys ...string) map[string]bool {
		m.FlushAll()
		for _, k := range keys {
			m.Set(k, "x")
		}
		found, _, err := c.Scan(t.Context(), 0, pattern, 1000).Result()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, k := range found {
			got[k] = true
		}
		return got
	}
	f.Fuzz(func(t *testing.T, prefix, name string, tagged bool) {
		if prefix == "" {
			return
		}
		ks := NewScheme(prefix, tagged)
		if !ks.TagSafe(name) {
			return
		}
		key := ks.LockKey(name)
		got, ok := ks.NameOf(key)
		signalLike := strings.HasPrefix(key, ks.signalPrefix) && strings.HasPrefix(ks.signalPrefix, ks.lockPrefix) ||
			strings.HasPrefix(key, ks.fencePrefix) && strings.HasPrefix(ks.fencePrefix, ks.lockPrefix)
		if !signalLike && (!ok || got != name) {
			t.Fatalf("nameOf(lockKey(%q)) = %q, %v (prefix %q)", name, got, ok, prefix)
		}
		for _, other := range []string{ks.SignalKey(name), ks.FenceKey(name)} {
			if n, ok := ks.NameOf(other); ok && ks.LockKey(n) != other {
				t.Fatalf("nameOf(%q) = %q, a lock key that is not it", other, n)
			}
		}
		// The SCAN pattern for all locks matches the lock key and, glob
		// characters of the prefix being escaped, nothing outside the prefix.
		// (miniredis, the oracle here, panics on patterns that are not
		// UTF-8; TestNonUTF8Prefix covers those on a real server.)
		if !utf8.ValidString(key) || !utf8.ValidString(ks.ScanPattern("*")) {
			return
		}
		alien := "x" + key
		found := matches(t, ks.ScanPattern("*"), key, alien)
		if !found[key] {
			t.Fatalf("scanPattern %q does not match %q", ks.ScanPattern("*"), key)
		}
		if found[alien] && !strings.HasPrefix(alien, prefix) {
			t.Fatalf("scanPattern %q matches %q, outside the prefix", ks.ScanPattern("*"), alien)
		}
	})
}
