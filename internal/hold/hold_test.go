package hold

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/wire"
)

// plainAck runs scripts with no replica acknowledgement.
type plainAck struct{}

func (plainAck) Run(ctx context.Context, c redis.UniversalClient, s *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	return s.Run(ctx, c, keys, args...), nil
}

func testConfig(t *testing.T, expire time.Duration) Config {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return Config{Client: c, Keys: []string{"lock:job", "lock-signal:job"}, Extend: wire.Extend, Reads: true, Expire: expire, Ack: plainAck{}}
}

// Python's AlreadyStarted: a second start of the renewal of one hold is an
// error and starts no second goroutine.
func TestRenewalStartsOnce(t *testing.T) {
	h := New(testConfig(t, time.Minute), time.Now(), "id")
	if err := h.StartRenewal(time.Now()); err != nil {
		t.Fatalf("first StartRenewal() = %v", err)
	}
	first := h.RenewalDone()
	if err := h.StartRenewal(time.Now()); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second StartRenewal() = %v, want ErrAlreadyStarted", err)
	}
	if h.RenewalDone() != first {
		t.Fatal("second StartRenewal replaced the goroutine's done channel")
	}
	h.stopRenewal()
	h.End(ErrReleased)
	h.stopRenewal() // safe twice
}

// Redis counts expires in whole milliseconds (PX drops the fraction), so
// the local deadline must too, or it would outlive the key by the
// fraction.
func TestExpireCountsWholeMilliseconds(t *testing.T) {
	sent := time.Now()
	h := New(testConfig(t, 50*time.Millisecond+999*time.Microsecond), sent, "id")
	defer h.End(ErrReleased)
	if got, want := h.expires.Sub(sent), 50*time.Millisecond; got != want {
		t.Fatalf("local deadline %v after the send, want %v", got, want)
	}
	h.extended(sent, 20*time.Millisecond+500*time.Microsecond)
	if got, want := h.expires.Sub(sent), 20*time.Millisecond; got != want {
		t.Fatalf("after an extend of 20.5ms the deadline is %v after the send, want %v", got, want)
	}
}

// A loss's error matches ErrLost and its reason, and names the package
// once ("lock lost: redislock: lock key expired" said it twice).
func TestLostErrSaysThePackageOnce(t *testing.T) {
	for _, reason := range []error{ErrExpired, ErrTakenOver, ErrUnreachable, ErrMaxHold} {
		err := LostErr(reason)
		if !errors.Is(err, ErrLost) || !errors.Is(err, reason) {
			t.Errorf("LostErr(%v) matches ErrLost %v, its reason %v; want both", reason, errors.Is(err, ErrLost), errors.Is(err, reason))
		}
		if got := err.Error(); strings.Count(got, "redislock:") != 1 || !strings.HasPrefix(got, "redislock: lock lost: ") {
			t.Errorf("LostErr(%v) = %q", reason, got)
		}
	}
}
