package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// Tokens strictly increase from grant to grant, across holders and
// clients: 1,000 grants from four clients, recorded in grant order.
func TestFencingTokensIncrease(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		const clients, grants = 4, 250
		var (
			mu     sync.Mutex
			tokens []int64
			wg     sync.WaitGroup
		)
		for range clients {
			l := mustNew(t, b.client(), "job", redislock.WithFencing(), redislock.WithExpire(10*time.Second))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range grants {
					if err := l.Acquire(ctx); err != nil {
						t.Error(err)
						return
					}
					mu.Lock() // inside the critical section: grant order
					tokens = append(tokens, l.Token())
					mu.Unlock()
					if err := l.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if len(tokens) != clients*grants {
			t.Fatalf("%d grants, want %d", len(tokens), clients*grants)
		}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("token %d = %d after %d: not increasing", i, tokens[i], tokens[i-1])
			}
		}
		if last, _ := b.client().Get(ctx, "lock-fence:job").Int64(); last != tokens[len(tokens)-1] {
			t.Fatalf("lock-fence:job = %d, want the last token %d", last, tokens[len(tokens)-1])
		}
		if tokens[0] < 1<<40 || tokens[len(tokens)-1] >= 1<<53 {
			t.Fatalf("tokens %d..%d, want microsecond clock values below 2^53", tokens[0], tokens[len(tokens)-1])
		}
	})
}

// A fence key ahead of the server's clock (a clock stepped back, a fence
// written under a faster clock): tokens go on from the last one + 1, not
// back to the clock.
func TestFencingTokensOutrunTheClock(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		const ahead = int64(1) << 52 // microseconds: in the year 2112, and exact in Lua's doubles
		if err := c.Set(ctx, "lock-fence:job", ahead, 0).Err(); err != nil {
			t.Fatal(err)
		}
		l := mustNew(t, c, "job", redislock.WithFencing(), redislock.WithExpire(time.Minute))
		for i := int64(1); i <= 3; i++ {
			mustAcquire(t, ctx, l)
			if got := l.Token(); got != ahead+i {
				t.Fatalf("grant %d: Token() = %d, want the fence %d + %d", i, got, ahead, i)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := c.Get(ctx, "lock-fence:job").Int64(); got != ahead+3 {
			t.Fatalf("lock-fence:job = %d, want %d", got, ahead+3)
		}
	})
}

// A restart that keeps nothing between two grants: the second token is
// still larger. A plain INCR counter (the broken variant) restarts at 1.
func TestFencingTokensSurviveRestart(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	l := mustNew(t, s.Client(func(o *redis.Options) { o.MaxRetries = 5 }), "job", redislock.WithFencing())
	mustAcquire(t, ctx, l)
	first := l.Token()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	naive := s.Client()
	naiveFirst := naive.Incr(ctx, "naive-fence").Val()

	s.Restart()
	if n := s.Client().DBSize(ctx).Val(); n != 0 {
		t.Fatalf("the restarted server kept %d keys", n)
	}
	mustAcquire(t, ctx, l)
	if second := l.Token(); second <= first {
		t.Fatalf("token after restart %d <= %d before", second, first)
	}
	if naiveSecond := naive.Incr(ctx, "naive-fence").Val(); naiveSecond > naiveFirst {
		t.Fatalf("the naive counter went from %d to %d: the check cannot tell them apart", naiveFirst, naiveSecond)
	}
	l.Release(ctx)
}

// fencedStore is a resource that checks tokens: it refuses a write whose
// token is lower than the highest it accepted.
type fencedStore struct {
	unchecked bool // the broken variant: takes any token

	mu    sync.Mutex
	fence int64
	value string
}

var errStaleToken = errors.New("stale fencing token")

func (s *fencedStore) write(token int64, v string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.fence && !s.unchecked {
		return fmt.Errorf("%w: %d < %d", errStaleToken, token, s.fence)
	}
	s.fence, s.value = token, v
	return nil
}

// A holder whose lock expired (the test deletes its key) and was taken by
// another writes late: its guarded write is refused and the new holder's
// stands, and a resource that checks tokens refuses its stale token. The
// broken variant writes late without either check (a plain write, a store
// that takes any token): the same checks find the new holder's data
// overwritten.
func TestLateHolderIsFenced(t *testing.T) {
	quick(t)
	andBroken(t, "guarded and fenced", "unguarded and unfenced", func(t *testing.T, broken bool) {
		s, ctx, admin := started(t)
		old := mustNew(t, s.Client(), "job", redislock.WithFencing(), redislock.WithExpire(time.Minute))
		mustAcquire(t, ctx, old)
		oldToken := old.Token()
		if err := old.Guard(ctx, func(p redis.Pipeliner) error { return p.Set(ctx, "data", "old-1", 0).Err() }); err != nil {
			t.Fatalf("Guard() while holding = %v", err)
		}

		admin.Del(ctx, old.Key()) // the old holder's lock expires while it is paused
		next := mustNew(t, s.Client(), "job", redislock.WithFencing(), redislock.WithExpire(time.Minute))
		mustAcquire(t, ctx, next)
		if next.Token() <= oldToken {
			t.Fatalf("new holder's token %d <= the old one %d", next.Token(), oldToken)
		}
		store := &fencedStore{unchecked: broken}
		if err := store.write(next.Token(), "next"); err != nil {
			t.Fatal(err)
		}
		if err := next.Guard(ctx, func(p redis.Pipeliner) error { return p.Set(ctx, "data", "next", 0).Err() }); err != nil {
			t.Fatalf("new holder's Guard() = %v", err)
		}

		// The old holder wakes up and writes late.
		ran := false
		late := func(p redis.Pipeliner) error { ran = true; return p.Set(ctx, "data", "old-2", 0).Err() }
		var guardErr error
		if broken {
			_, guardErr = admin.TxPipelined(ctx, late)
		} else {
			guardErr = old.Guard(ctx, late)
		}
		storeErr := store.write(oldToken, "old-2")

		data := admin.Get(ctx, "data").Val()
		t.Logf("late write: Guard %v (fn ran %v), store %v; data %q, store %q", guardErr, ran, storeErr, data, store.value)
		refused := errors.Is(guardErr, redislock.ErrNotAcquired) && !ran && errors.Is(storeErr, errStaleToken)
		intact := data == "next" && store.value == "next"
		if refused != !broken || intact != !broken {
			t.Fatalf("late write refused = %v and the new holder's data intact = %v; want %v", refused, intact, !broken)
		}
	})
}

// Guard's transaction is aborted when the key changes or expires between
// the owner check and EXEC.
func TestGuardAbortsWhenTheKeyChanges(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	l := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute))
	mustAcquire(t, ctx, l)
	err := l.Guard(ctx, func(p redis.Pipeliner) error {
		admin.Set(ctx, l.Key(), "thief", 0) // between the check and EXEC
		p.Set(ctx, "data", "mine", 0)
		return nil
	})
	if !errors.Is(err, redislock.ErrNotAcquired) || admin.Exists(ctx, "data").Val() != 0 {
		t.Fatalf("Guard() with the key taken before EXEC = %v (data exists %d), want ErrNotAcquired and no write",
			err, admin.Exists(ctx, "data").Val())
	}
	errFn := errors.New("fn failed")
	admin.Set(ctx, l.Key(), l.ID(), time.Minute)
	if err := l.Guard(ctx, func(p redis.Pipeliner) error { p.Set(ctx, "data", "x", 0); return errFn }); !errors.Is(err, errFn) {
		t.Fatalf("Guard() with fn failing = %v, want fn's error", err)
	}
	if admin.Exists(ctx, "data").Val() != 0 {
		t.Fatal("Guard ran the commands of a failed fn")
	}
}

// The fence key is opt-in: a lock without fencing writes only
// python-redis-lock's keys, and with fencing those keys are unchanged.
func TestFencingKeepsPythonKeys(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		plain := mustNew(t, c, "plain", redislock.WithExpire(time.Minute))
		mustAcquire(t, ctx, plain)
		if plain.Token() != 0 {
			t.Fatalf("Token() without fencing = %d, want 0", plain.Token())
		}
		plain.Release(ctx)
		if keys := c.Keys(ctx, "*fence*").Val(); len(keys) != 0 {
			t.Fatalf("a lock without fencing wrote %q", keys)
		}
		fenced := mustNew(t, c, "fenced", redislock.WithExpire(time.Minute), redislock.WithFencing())
		mustAcquire(t, ctx, fenced)
		if got := c.Get(ctx, "lock:fenced").Val(); got != fenced.ID() {
			t.Fatalf("lock:fenced = %q, want the owner id", got)
		}
		fenced.Release(ctx)
		if got := c.LRange(ctx, "lock-signal:fenced", 0, -1).Val(); len(got) != 1 || got[0] != "1" {
			t.Fatalf("lock-signal:fenced = %q", got)
		}
		if n, err := redislock.ResetAll(ctx, c); err != nil || n != 0 {
			t.Fatalf("ResetAll() = %d, %v; the fence key must not count as a lock", n, err)
		}
	})
}
