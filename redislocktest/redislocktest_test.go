package redislocktest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/leakcheck"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/redislocktest"
)

func TestMain(m *testing.M) {
	// leakcheck.Run, not goleak.VerifyTestMain with goleak.Cleanup: a
	// Cleanup replaces VerifyTestMain's os.Exit, and the leak's exit code
	// was dropped (the package passed with goroutines left).
	os.Exit(leakcheck.Run(m))
}

// quick is redistest.Quick.
var quick = redistest.Quick

// onBoth runs fn on an in-process server and on a real one.
func onBoth(t *testing.T, fn func(t *testing.T, s *redislocktest.Server)) {
	t.Run("mini", func(t *testing.T) { fn(t, redislocktest.NewMini(t)) })
	t.Run("real", func(t *testing.T) { fn(t, redislocktest.NewReal(t)) })
}

// testExpire is the expire of the tests' renewing holds. On miniredis a
// loss is found at the next renewal, two thirds of it in; the third left
// is the slack a renewal has before the hold counts as unreachable, which
// a loaded CI machine (-race, packages in parallel) needs: a 60 ms expire
// left 20 ms, and a stalled renewal ended holds as unreachable instead of
// lost to the reason the test forced.
const testExpire = time.Second

// waitDone waits for l's hold to end, failing t after within.
func waitDone(t *testing.T, l *redislock.Lock, within time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(within):
		t.Fatalf("Done still open %v on (Err %v)", within, l.Err())
	}
}

func TestServerClient(t *testing.T) {
	onBoth(t, func(t *testing.T, s *redislocktest.Server) {
		ctx := context.Background()
		c := s.Client()
		if err := c.Set(ctx, "k", "v", time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		if !c.Options().ContextTimeoutEnabled {
			t.Error("the kit's client has ContextTimeoutEnabled off")
		}
		if s.IsReal() != (s.Miniredis() == nil) {
			t.Errorf("IsReal %v with Miniredis %v", s.IsReal(), s.Miniredis())
		}
	})
}

// ForceLoss ends a renewing hold with the matching reason, and cancels a
// Do callback's context.
func TestForceLoss(t *testing.T) {
	quick(t)
	for _, reason := range []error{redislocktest.Expired, redislocktest.TakenOver} {
		t.Run(reason.Error(), func(t *testing.T) {
			onBoth(t, func(t *testing.T, s *redislocktest.Server) {
				ctx := context.Background()
				l, err := redislock.New(s.Client(), "job", redislock.WithExpire(testExpire), redislock.WithAutoRenewal())
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Acquire(ctx); err != nil {
					t.Fatal(err)
				}
				s.ForceLoss(l, reason)
				waitDone(t, l, 3*time.Second)
				if !errors.Is(l.Err(), redislock.ErrLost) || !errors.Is(l.Err(), reason) {
					t.Fatalf("Err() = %v, want ErrLost and %v", l.Err(), reason)
				}

				// Do: the callback's context is cancelled with the loss.
				l.Release(ctx)               // the lost hold ends with its Release, as a sync.Mutex's Unlock
				s.Client().Del(ctx, l.Key()) // free again (a TakenOver key lives a minute)
				err = l.Do(ctx, func(ctx context.Context) error {
					s.ForceLoss(l, reason)
					select {
					case <-ctx.Done():
						return context.Cause(ctx)
					case <-time.After(3 * time.Second):
						return errors.New("not cancelled within 3s")
					}
				})
				if !errors.Is(err, redislock.ErrLost) || !errors.Is(err, reason) {
					t.Fatalf("Do() = %v, want ErrLost and %v", err, reason)
				}
			})
		})
	}
}

// Steal: another owner holds the lock, with a higher fencing token; the
// victim's hold ends as taken over and Guard refuses its writes.
func TestSteal(t *testing.T) {
	onBoth(t, func(t *testing.T, s *redislocktest.Server) {
		ctx := context.Background()
		opts := []redislock.Option{redislock.WithExpire(testExpire), redislock.WithAutoRenewal(), redislock.WithFencing()}
		l, err := redislock.New(s.Client(), "job", opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		thief := s.Steal(l, opts...)
		defer thief.Release(ctx)
		if thief.Token() <= l.Token() {
			t.Fatalf("the thief's token %d is not above the victim's %d", thief.Token(), l.Token())
		}
		err = l.Guard(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, "row", "late write", 0)
			return nil
		})
		if !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("Guard() after Steal = %v, want ErrNotAcquired", err)
		}
		if n := s.Client().Exists(ctx, "row").Val(); n != 0 {
			t.Fatal("Guard ran the victim's write")
		}
		waitDone(t, l, 3*time.Second)
		if !errors.Is(l.Err(), redislock.ErrTakenOver) {
			t.Fatalf("Err() = %v, want ErrTakenOver", l.Err())
		}
	})
}

// FastForward expires a held key on the in-process server; a renewing
// holder learns of it at its next renewal.
func TestFastForward(t *testing.T) {
	s := redislocktest.NewMini(t)
	ctx := context.Background()
	l, err := redislock.New(s.Client(), "job", redislock.WithExpire(testExpire), redislock.WithAutoRenewal())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	s.FastForward(2 * testExpire)
	if n := s.Client().Exists(ctx, l.Key()).Val(); n != 0 {
		t.Fatal("the key outlived FastForward past its TTL")
	}
	waitDone(t, l, 3*time.Second)
	if !errors.Is(l.Err(), redislock.ErrExpired) {
		t.Fatalf("Err() = %v, want ErrExpired", l.Err())
	}
}

// Outage: a hold survives one shorter than what its renewals can bridge,
// and is lost with ErrUnreachable at its deadline after a longer one.
func TestOutage(t *testing.T) {
	quick(t)
	for _, c := range []struct {
		name    string
		outage  time.Duration
		survive bool
	}{
		{"short", 200 * time.Millisecond, true},
		{"long", 2 * time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			onBoth(t, func(t *testing.T, s *redislocktest.Server) {
				ctx := context.Background()
				// A 1 s expire renews at about 660 ms, and retries every 100
				// ms until its local deadline (about 988 ms) when it fails.
				l, err := redislock.New(s.Client(), "job-"+c.name, redislock.WithExpire(time.Second), redislock.WithAutoRenewal(), redislock.WithTracking(false))
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Acquire(ctx); err != nil {
					t.Fatal(err)
				}
				acquired := time.Now()
				time.Sleep(time.Until(acquired.Add(550 * time.Millisecond)))
				s.Outage(c.outage) // covers the first renewal
				select {
				case <-l.Done():
					if c.survive {
						t.Fatalf("lost during a %v outage: %v", c.outage, l.Err())
					}
					if !errors.Is(l.Err(), redislock.ErrUnreachable) {
						t.Fatalf("Err() = %v, want ErrUnreachable", l.Err())
					}
				case <-time.After(1500 * time.Millisecond):
					if !c.survive {
						t.Fatalf("still held 2 s after the acquire, through a %v outage", c.outage)
					}
				}
				if c.survive {
					if err := l.Release(ctx); err != nil {
						t.Fatalf("Release() after the outage = %v", err)
					}
				}
			})
		})
	}
}
