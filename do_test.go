package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
)

// Do reports a loss that happened while fn ran even when fn ignored its
// context and returned nil.
func TestDoReportsLossFnIgnored(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		l := mustNew(t, b.client(), "job", redislock.WithExpire(100*time.Millisecond))
		err := l.Do(ctx, func(context.Context) error {
			<-l.Done() // the expire runs out; fn carries on and returns nil
			return nil
		})
		if !errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrExpired) {
			t.Fatalf("Do() = %v, want ErrLost and ErrExpired", err)
		}
		// fn returns its context's error after the loss: Do's error says
		// both on one line (errors.Join put each on a line of its own).
		lc := mustNew(t, b.client(), "job-cause", redislock.WithExpire(100*time.Millisecond))
		err = lc.Do(ctx, func(fctx context.Context) error {
			<-fctx.Done()
			return fctx.Err()
		})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, redislock.ErrLost) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Do() = %q; want fn's error and the loss, on one line", errString(err))
		}
		// fn cancels the caller's context: the release still runs.
		l3 := mustNew(t, b.client(), "job3", redislock.WithExpire(time.Minute))
		cctx, cancel := context.WithCancel(ctx)
		if err := l3.Do(cctx, func(context.Context) error { cancel(); return nil }); err != nil {
			t.Fatalf("Do() whose caller's context was cancelled = %v, want nil", err)
		}
		if n := b.client().Exists(ctx, l3.Key()).Val(); n != 0 {
			t.Fatal("Do() left the key held after its caller's context was cancelled")
		}
		// Without a loss, Do returns fn's nil.
		l2 := mustNew(t, b.client(), "job2", redislock.WithExpire(time.Minute))
		if err := l2.Do(ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Do() without loss = %v, want nil", err)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// A reset while fn runs (noticed at once through the key's watch): Do's
// error is the loss, which says why the lock is not held; the release
// that then finds the key gone adds nothing (one mention of the lock, no
// ErrNotAcquired).
func TestDoAfterAResetReportsTheLossAlone(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	l := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute))
	err := l.Do(ctx, func(fctx context.Context) error {
		if _, err := mustNew(t, s.Client(), "job").Reset(ctx); err != nil {
			return err
		}
		<-fctx.Done()
		return fctx.Err()
	})
	if !errors.Is(err, redislock.ErrLost) || errors.Is(err, redislock.ErrNotAcquired) || strings.Count(err.Error(), `"job"`) != 1 {
		t.Fatalf("Do() reset while fn ran = %q; want the loss alone, naming the lock once", errString(err))
	}
}
