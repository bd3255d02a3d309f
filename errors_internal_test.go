package redislock

import (
	"errors"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestErrorMessagesNameTheLock(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	l, _ := New(c, "reports")
	l2, _ := New(c, "reports")
	if err := l.TryAcquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := l2.TryAcquire(t.Context())
	if want := `lock "reports": redislock: lock is held by another owner`; err == nil || err.Error() != want {
		t.Fatalf("TryAcquire() error = %q, want %q", err, want)
	}
	if _, err := New(c, "reports", WithExpire(-1)); err == nil || !strings.Contains(err.Error(), `lock "reports"`) {
		t.Fatalf("New() error %q does not name the lock", err)
	}
	// Every error of New is wrapped with the name, as documented, even the
	// empty one's.
	if _, err := New(c, ""); err == nil || !errors.Is(err, ErrInvalidName) || !strings.HasPrefix(err.Error(), `lock "": `) {
		t.Fatalf("New(\"\") error %q, want ErrInvalidName wrapped with the (empty) name", err)
	}
	if _, err := New(nil, "reports"); err == nil || !strings.HasPrefix(err.Error(), `lock "reports": `) {
		t.Fatalf("New(nil) error %q does not name the lock", err)
	}
	l.Release(t.Context())
}
