package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
)

// Do's release acts only on the hold Do acquired. G1's Do loses its hold
// while fn1 still runs; G2 then takes the lock through TryDo on the same
// *Lock (same id). When fn1 returns, G1's Do must leave G2's key alone, and
// report the loss. The broken variant (G1 calls Release itself, as Do did
// before) must delete G2's key, which the same check catches.
func TestDoReleasesOnlyItsOwnHold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		broken bool
	}{
		{"Do", false},
		{"broken/Release whatever is held", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onBoth(t, func(t *testing.T, b *backend) {
				ctx := ctxT(t)
				admin := b.client()
				// No renewal: the hold is lost when its expire runs out on
				// the local clock. G2's hold has the same expire, which
				// must outlast its stay in the critical section on a
				// loaded machine.
				l := mustNew(t, b.client(), "job", redislock.WithExpire(time.Second))
				g2Holds := make(chan struct{})
				g1Returned := make(chan error, 1)
				var inG2 []string // what G2 saw while in its critical section
				g2Done := make(chan error, 1)

				fn1 := func(ctx context.Context) error {
					<-ctx.Done() // the loss
					go func() {
						err := l.TryDo(context.WithoutCancel(ctx), func(ctx context.Context) error {
							close(g2Holds)
							// Stay in the critical section until G1's Do
							// has returned, then look at the key.
							<-g1Done(g1Returned)
							owner, _ := admin.Get(ctx, l.Key()).Result()
							inG2 = append(inG2, owner)
							other := mustNew(t, b.client(), "job")
							if err := other.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
								inG2 = append(inG2, "another owner's TryAcquire: "+errString(err))
								if err == nil {
									other.Release(ctx)
								}
							}
							return nil
						})
						g2Done <- err
					}()
					<-g2Holds
					return nil
				}
				var err error
				if tc.broken {
					if err = l.Acquire(ctx); err == nil {
						err = fn1(ctx2(ctx, l))
						if rerr := l.Release(ctx); rerr != nil {
							err = errors.Join(err, rerr)
						}
					}
				} else {
					err = l.Do(ctx, fn1)
				}
				g1Returned <- err
				gerr := <-g2Done
				if gerr != nil && !tc.broken {
					t.Fatalf("G2's TryDo() = %v", gerr)
				}
				intact := len(inG2) == 1 && inG2[0] == l.ID()
				if intact == tc.broken {
					t.Fatalf("after G1 returned, G2 in its critical section saw %q (own id %q); want intact = %v",
						inG2, l.ID(), !tc.broken)
				}
				if !tc.broken && (!errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrExpired)) {
					t.Fatalf("G1's Do() = %v, want the loss (ErrLost, ErrExpired)", err)
				}
			})
		})
	}
}

// g1Done turns the buffered result channel into a channel that is ready
// once G1 has returned, and puts the result back for the test to read.
func g1Done(ch chan error) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		err := <-ch
		ch <- err
		close(done)
	}()
	return done
}

// ctx2 is a context cancelled when l's hold ends, as Do's is.
func ctx2(ctx context.Context, l *redislock.Lock) context.Context {
	c, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-l.Done():
		case <-ctx.Done():
		}
		cancel()
	}()
	return c
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// Do reports a loss that happened while fn ran even when fn ignored its
// context and returned nil.
func TestDoReportsLossFnIgnored(t *testing.T) {
	onBoth(t, func(t *testing.T, b *backend) {
		ctx := ctxT(t)
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
