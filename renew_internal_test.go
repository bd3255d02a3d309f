package redislock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Python's AlreadyStarted: a second start of the renewal of one hold is an
// error and starts no second goroutine.
func TestRenewalStartsOnce(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	l, err := New(c, "job", WithExpire(time.Minute), WithAutoRenewal())
	if err != nil {
		t.Fatal(err)
	}
	h := newHold(&l.core, time.Now(), l.ID())
	if err := h.startRenewal(time.Now()); err != nil {
		t.Fatalf("first startRenewal() = %v", err)
	}
	first := h.renewDone
	if err := h.startRenewal(time.Now()); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second startRenewal() = %v, want ErrAlreadyStarted", err)
	}
	if h.renewDone != first {
		t.Fatal("second startRenewal replaced the goroutine's done channel")
	}
	h.stopRenewal()
	h.end(ErrReleased)
	h.stopRenewal() // safe twice
}

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

// Redis counts expires in whole milliseconds (PX drops the fraction), so
// the local deadline must too, or it would outlive the key by the
// fraction.
func TestExpireCountsWholeMilliseconds(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	l, err := New(c, "job", WithExpire(50*time.Millisecond+999*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	h := newHold(&l.core, sent, l.ID())
	defer h.end(ErrReleased)
	if got, want := h.expires.Sub(sent), 50*time.Millisecond; got != want {
		t.Fatalf("local deadline %v after the send, want %v (Redis gets PX %s)", got, want, l.expireMS)
	}
	h.extended(sent, 20*time.Millisecond+500*time.Microsecond)
	if got, want := h.expires.Sub(sent), 20*time.Millisecond; got != want {
		t.Fatalf("after an extend of 20.5ms the deadline is %v after the send, want %v", got, want)
	}
}
