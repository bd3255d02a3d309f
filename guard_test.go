package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// Our own renewal (or an Extend) touching the key between Guard's WATCH and
// its EXEC aborts the transaction, but the lock is still ours: Guard runs
// it again and succeeds. A key that really changed hands still gets
// ErrNotAcquired (TestGuardAbortsWhenTheKeyChanges), and a key that keeps
// changing while ours ends in a bounded number of attempts.
func TestGuardRetriesOwnTouches(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		admin := b.client()
		l := mustNew(t, b.client(), "job", redislock.WithExpire(time.Minute))
		mustAcquire(t, ctx, l)
		calls := 0
		var set *redis.StatusCmd
		err := l.Guard(ctx, func(p redis.Pipeliner) error {
			calls++
			if calls == 1 {
				// What the renewal does, on another connection.
				if err := l.Extend(ctx, time.Minute); err != nil {
					t.Errorf("Extend() = %v", err)
				}
			}
			set = p.Set(ctx, "data", calls, 0)
			return nil
		})
		if err != nil || calls != 2 || set.Err() != nil || admin.Get(ctx, "data").Val() != "2" {
			t.Fatalf("Guard() with our own extend in between = %v after %d calls (data %q), want nil after 2",
				err, calls, admin.Get(ctx, "data").Val())
		}

		// Touched on every attempt: Guard gives up, without ErrNotAcquired.
		calls = 0
		err = l.Guard(ctx, func(p redis.Pipeliner) error {
			calls++
			l.Extend(ctx, time.Minute)
			p.Set(ctx, "data", "never", 0)
			return nil
		})
		if !errors.Is(err, redis.TxFailedErr) || errors.Is(err, redislock.ErrNotAcquired) || calls != 10 {
			t.Fatalf("Guard() touched on every attempt = %v after %d calls, want TxFailedErr after 10", err, calls)
		}
		if got := admin.Get(ctx, "data").Val(); got != "2" {
			t.Fatalf("data = %q after the aborted transactions, want \"2\"", got)
		}
	})
}
