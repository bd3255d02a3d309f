package redislock

import (
	"errors"
	"testing"
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
		ks := newKeyScheme(tt.prefix, tt.tagged)
		if got := ks.lockKey(tt.name); got != tt.lock {
			t.Errorf("lockKey(%q) = %q, want %q", tt.name, got, tt.lock)
		}
		if got := ks.signalKey(tt.name); got != tt.signal {
			t.Errorf("signalKey(%q) = %q, want %q", tt.name, got, tt.signal)
		}
		if got := ks.fenceKey(tt.name); got != tt.fence {
			t.Errorf("fenceKey(%q) = %q, want %q", tt.name, got, tt.fence)
		}
		if got := ks.scanPattern("*"); got != tt.pattern {
			t.Errorf("scanPattern(*) = %q, want %q", got, tt.pattern)
		}
		if got, ok := ks.nameOf(tt.lock); !ok || got != tt.name {
			t.Errorf("nameOf(%q) = %q, %v; want %q", tt.lock, got, ok, tt.name)
		}
		for _, other := range []string{tt.signal, tt.fence} {
			if got, ok := ks.nameOf(other); ok {
				t.Errorf("nameOf(%q) = %q, true; want not a lock key", other, got)
			}
		}
	}
	// A prefix whose signal prefix starts with it: signal keys are not locks.
	ks := newKeyScheme("lock", false)
	if _, ok := ks.nameOf("lock-signal:x"); ok {
		t.Error(`prefix "lock": nameOf("lock-signal:x") is a lock`)
	}
	if name, ok := ks.nameOf("lockx"); !ok || name != "x" {
		t.Errorf(`prefix "lock": nameOf("lockx") = %q, %v`, name, ok)
	}
	tagged := newKeyScheme("lock:", true)
	for _, key := range []string{"lock:x", "lock:{x", "lock:x}", "lock:{"} {
		if name, ok := tagged.nameOf(key); ok {
			t.Errorf("tagged nameOf(%q) = %q, true; want not a lock key", key, name)
		}
	}
	for _, bad := range []struct{ prefix, name string }{{"lock:", "a}b"}, {"lock:", "}"}, {"a{b}:", "x"}, {"a{:", "x"}} {
		if err := newKeyScheme(bad.prefix, true).checkName(bad.name); !errors.Is(err, ErrInvalidHashTag) {
			t.Errorf("tagged checkName(prefix %q, name %q) = %v, want ErrInvalidHashTag", bad.prefix, bad.name, err)
		}
		if err := newKeyScheme(bad.prefix, false).checkName(bad.name); err != nil {
			t.Errorf("untagged checkName(prefix %q, name %q) = %v, want nil", bad.prefix, bad.name, err)
		}
	}
}
