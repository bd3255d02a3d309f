package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
)

// Done closes the safety margin before the key can expire: when it does,
// the key is still there, with about the margin left to live. With a
// margin of 0 (the broken variant, the behaviour before margins) the key
// is at its last milliseconds or gone.
func TestDoneFiresTheMarginBeforeTheKeyExpires(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		margin time.Duration
	}{
		{"margin 400ms", 400 * time.Millisecond},
		{"broken/margin 0", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx, admin := started(t)
			l := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Second), redislock.WithSafetyMargin(tc.margin))
			mustAcquire(t, ctx, l)
			<-l.Done()
			pttl := admin.PTTL(ctx, "lock:job").Val()
			t.Logf("at Done the key has %v left (margin %v); Err() = %v", pttl, tc.margin, l.Err())
			before := pttl >= 300*time.Millisecond // 100 ms for the read on a loaded machine
			if want := tc.margin > 0; before != want {
				t.Fatalf("key TTL at Done = %v; want >= 300ms: %v", pttl, want)
			}
		})
	}
}

// When renewals stop getting through, the hold ends the margin before the
// key can expire, and renewals come early enough that a healthy hold with
// a large margin is never lost.
func TestMarginWithRenewal(t *testing.T) {
	t.Parallel()
	s, ctx, admin := started(t)
	const expire, margin = 1200 * time.Millisecond, 500 * time.Millisecond
	l := mustNew(t, s.Client(), "job", redislock.WithExpire(expire), redislock.WithAutoRenewal(), redislock.WithSafetyMargin(margin), redislock.WithTracking(false))
	mustAcquire(t, ctx, l)
	time.Sleep(3 * expire) // renewals every (1200-500)*2/3 = 467 ms
	select {
	case <-l.Done():
		t.Fatalf("healthy renewing hold lost: %v", l.Err())
	default:
	}
	// Renewals now go unanswered: the server holds every write.
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "3000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.Do(ctx, "CLIENT", "UNPAUSE")
	paused := time.Now()
	pttlAtPause := admin.PTTL(ctx, "lock:job").Val()
	<-l.Done()
	lostAfter := time.Since(paused)
	t.Logf("writes paused with %v left on the key; hold lost %v later: %v", pttlAtPause, lostAfter, l.Err())
	if left := pttlAtPause - lostAfter; left < margin-150*time.Millisecond {
		t.Fatalf("hold lost %v before the key could expire; want about the %v margin", left, margin)
	}
}

// An Extend not longer than the safety margin would end the hold at once
// (it would count as lost while the key is still ours): it is refused
// with ErrInvalidDuration, and nothing is sent.
func TestExtendNotLongerThanTheMargin(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	l := mustNew(t, s.Client(), "job", redislock.WithExpire(10*time.Second), redislock.WithSafetyMargin(200*time.Millisecond))
	mustAcquire(t, ctx, l)
	before := admin.PTTL(ctx, "lock:job").Val()
	for _, d := range []time.Duration{80 * time.Millisecond, 200 * time.Millisecond} {
		if err := l.Extend(ctx, d); !errors.Is(err, redislock.ErrInvalidDuration) {
			t.Fatalf("Extend(%v) with a 200ms margin = %v, want ErrInvalidDuration", d, err)
		}
	}
	if after := admin.PTTL(ctx, "lock:job").Val(); after > before || after < before-time.Second {
		t.Fatalf("key TTL %v after the refused Extends, %v before: want it unchanged", after, before)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("hold ended: %v", err)
	}
	if err := l.Extend(ctx, 201*time.Millisecond); err != nil {
		t.Fatalf("Extend(201ms) = %v", err)
	}
}
