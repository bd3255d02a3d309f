package redislock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// Extend(ctx, 0) resets the key to the Lock's own expire, as
// python-redis-lock's extend() without an argument; on a Lock without
// expire it is an argument error and sends nothing.
func TestExtendZeroUsesOwnExpire(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		admin := b.client()
		l := mustNew(t, b.client(), "job", redislock.WithExpire(10*time.Second))
		mustAcquire(t, ctx, l)
		admin.PExpire(ctx, l.Key(), time.Second)
		if err := l.Extend(ctx, 0); err != nil {
			t.Fatalf("Extend(0) = %v", err)
		}
		if pttl := admin.PTTL(ctx, l.Key()).Val(); pttl < 9*time.Second || pttl > 10*time.Second {
			t.Fatalf("PTTL after Extend(0) = %v, want the Lock's own 10 s", pttl)
		}

		c := b.client()
		hook := &countHook{}
		c.AddHook(hook)
		forever := mustNew(t, c, "forever", redislock.WithExpire(0))
		for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
			if err := forever.Extend(ctx, d); !errors.Is(err, redislock.ErrInvalidDuration) {
				t.Errorf("Extend(%v) without expire = %v, want ErrInvalidDuration", d, err)
			}
		}
		if n := hook.n; n != 0 {
			t.Fatalf("%d commands sent by refused Extends, want 0", n)
		}
	})
}

// Under auto-renewal an Extend longer than the expire is kept: renewals
// renew to what is left of it, never shorten it (before, the next renewal
// cut a 3 s Extend back to the 300 ms expire). The hold's local deadline
// follows, so the hold outlives the expire without a renewal.
func TestRenewalKeepsLongerExtend(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	c := s.Client()
	var extends atomic.Int32 // extend scripts answered
	c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if scriptOf(cmd) == "extend" {
			extends.Add(1)
		}
		return err
	}))
	l := mustNew(t, c, "job", redislock.WithExpire(300*time.Millisecond), redislock.WithAutoRenewal())
	mustAcquire(t, ctx, l)
	if err := l.Extend(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	// Wait for two renewals after the Extend.
	deadline := time.Now().Add(5 * time.Second)
	for extends.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d extends sent in 5 s, want the Extend and two renewals", extends.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pttl := admin.PTTL(ctx, l.Key()).Val(); pttl < time.Second {
		t.Fatalf("PTTL after renewals = %v, want what is left of the 3 s Extend (above 1 s)", pttl)
	}
	select {
	case <-l.Done():
		t.Fatalf("hold ended: %v", l.Err())
	default:
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
