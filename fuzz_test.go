package redislock

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// FuzzNew: New never panics; it either refuses with an ErrInvalidArgument
// or returns a Lock whose keys and id are what the inputs say.
func FuzzNew(f *testing.F) {
	f.Add("reports", "", int64(30000), int64(1000), "lock:", false)
	f.Add("", "id", int64(0), int64(1000), "lock:", false)
	f.Add("a}b", "w-1", int64(-1), int64(0), "_mayan_lock:", true)
	f.Add("x\x00\n'\"]]*?[", "\xff", int64(1), int64(1), "l*[?]:", false)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: New does no I/O
	defer c.Close()
	f.Fuzz(func(t *testing.T, name, id string, expireMS, signalMS int64, prefix string, tagged bool) {
		opts := []Option{
			WithExpire(time.Duration(expireMS) * time.Microsecond * 100),
			WithSignalExpire(time.Duration(signalMS) * time.Microsecond * 100),
			WithKeyPrefix(prefix),
			WithHashTag(tagged),
		}
		if id != "" || len(name)%2 == 1 {
			opts = append(opts, WithID(id))
		}
		l, err := New(c, name, opts...)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("New(%q) = %v, not an ErrInvalidArgument", name, err)
			}
			if l != nil {
				t.Fatal("New returned a Lock with an error")
			}
			return
		}
		if name == "" || prefix == "" {
			t.Fatalf("New accepted name %q prefix %q", name, prefix)
		}
		if !strings.HasPrefix(l.Key(), prefix) || !strings.Contains(l.Key(), name) {
			t.Fatalf("Key() = %q for prefix %q name %q", l.Key(), prefix, name)
		}
		if tagged && strings.ContainsRune(name, '}') {
			t.Fatalf("tagged New accepted name %q", name)
		}
		if l.ID() == "" {
			t.Fatal("empty ID()")
		}
	})
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
		ks := newKeyScheme(prefix, tagged)
		if ks.checkName(name) != nil {
			return
		}
		key := ks.lockKey(name)
		got, ok := ks.nameOf(key)
		signalLike := strings.HasPrefix(key, ks.signalPrefix) && strings.HasPrefix(ks.signalPrefix, ks.lockPrefix) ||
			strings.HasPrefix(key, ks.fencePrefix) && strings.HasPrefix(ks.fencePrefix, ks.lockPrefix)
		if !signalLike && (!ok || got != name) {
			t.Fatalf("nameOf(lockKey(%q)) = %q, %v (prefix %q)", name, got, ok, prefix)
		}
		for _, other := range []string{ks.signalKey(name), ks.fenceKey(name)} {
			if n, ok := ks.nameOf(other); ok && ks.lockKey(n) != other {
				t.Fatalf("nameOf(%q) = %q, a lock key that is not it", other, n)
			}
		}
		// The SCAN pattern for all locks matches the lock key and, glob
		// characters of the prefix being escaped, nothing outside the prefix.
		// (miniredis, the oracle here, panics on patterns that are not
		// UTF-8; TestNonUTF8Prefix covers those on a real server.)
		if !utf8.ValidString(key) || !utf8.ValidString(ks.scanPattern("*")) {
			return
		}
		alien := "x" + key
		found := matches(t, ks.scanPattern("*"), key, alien)
		if !found[key] {
			t.Fatalf("scanPattern %q does not match %q", ks.scanPattern("*"), key)
		}
		if found[alien] && !strings.HasPrefix(alien, prefix) {
			t.Fatalf("scanPattern %q matches %q, outside the prefix", ks.scanPattern("*"), alien)
		}
	})
}
