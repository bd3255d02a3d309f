package redislocktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/redislocktest"
)

// waitClosed fails t unless done closes within d.
func waitClosed(t *testing.T, done <-chan struct{}, within time.Duration) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("the hold did not end within %v", within)
	}
}

// A semaphore's permit: ForceLoss ends the hold with ErrExpired;
// StealPermit gives it to a thief with a higher token, even when full.
func TestForceLossAndStealPermit(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, s *redislocktest.Server) {
		ctx := context.Background()
		opts := []redislock.Option{redislock.WithExpire(testExpire), redislock.WithAutoRenewal(), redislock.WithFencing()}
		sem, err := redislock.NewSemaphore(s.Client(), "pool", 1, opts...)
		if err != nil {
			t.Fatal(err)
		}
		p, err := sem.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.ForceLoss(p, redislocktest.Expired)
		waitClosed(t, p.Done(), 3*time.Second)
		if err := p.Err(); !errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrExpired) {
			t.Fatalf("Err() = %v, want ErrLost and ErrExpired", err)
		}
		p, err = sem.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		thief := s.StealPermit(sem, p, opts...)
		defer thief.Release(ctx)
		waitClosed(t, p.Done(), 3*time.Second)
		if thief.Token() <= p.Token() {
			t.Fatalf("thief's token %d not above %d", thief.Token(), p.Token())
		}
		if st, _ := sem.Status(ctx); len(st.Holders) != 1 || st.Holders[0].Owner != thief.ID() {
			t.Fatalf("holders %v; want the thief alone", st.Holders)
		}
	})
}

// An RWMutex's read hold and write hold are each lost as asked.
func TestForceLossOfAnRWMutex(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, s *redislocktest.Server) {
		ctx := context.Background()
		rw, err := redislock.NewRWMutex(s.Client(), "cfg", redislock.WithExpire(testExpire), redislock.WithAutoRenewal())
		if err != nil {
			t.Fatal(err)
		}
		p, err := rw.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.ForceLoss(p, redislocktest.Expired)
		waitClosed(t, p.Done(), 3*time.Second)
		if err := p.Err(); !errors.Is(err, redislock.ErrLost) {
			t.Fatalf("read permit's Err() = %v, want ErrLost", err)
		}
		p.Release(ctx) // ErrNotAcquired: it is gone
		if err := rw.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		s.ForceLoss(rw, redislocktest.TakenOver)
		waitClosed(t, rw.Done(), 3*time.Second)
		if err := rw.Err(); !errors.Is(err, redislock.ErrLost) || !errors.Is(err, redislock.ErrTakenOver) {
			t.Fatalf("write hold's Err() = %v, want ErrLost and ErrTakenOver", err)
		}
		s.Client().Del(ctx, rw.Key())
	})
}
