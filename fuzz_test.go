package redislock

import (
	"errors"
	"strings"
	"testing"
	"time"

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
