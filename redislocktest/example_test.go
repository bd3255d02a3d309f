package redislocktest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/redislocktest"
)

// These are the README's "Testing code that uses the lock": a user's job
// and the tests a user writes for it with the kit, each in milliseconds.

// Locker is what the job needs of a lock: declared by the job's package
// (interfaces belong to their consumer), satisfied by *redislock.Lock.
type Locker interface {
	Do(ctx context.Context, fn func(ctx context.Context) error) error
}

// copyRows is the user's job: while it holds the lock it copies rows, and
// it must stop writing the moment the lock is lost (another worker may be
// copying them by then).
func copyRows(ctx context.Context, l Locker, rows <-chan string, write func(string)) error {
	return l.Do(ctx, func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return context.Cause(ctx) // lost: stop writing at once
			case r, ok := <-rows:
				if !ok {
					return nil
				}
				write(r)
			}
		}
	})
}

// rowSink records writes, safe for the job's goroutine and the test's.
type rowSink struct {
	mu   sync.Mutex
	rows []string
}

func (s *rowSink) write(r string) { s.mu.Lock(); s.rows = append(s.rows, r); s.mu.Unlock() }
func (s *rowSink) count() int     { s.mu.Lock(); defer s.mu.Unlock(); return len(s.rows) }

// The job stops writing when its lock is taken over, and says why.
func TestExampleJobStopsWhenTheLockIsLost(t *testing.T) {
	srv := redislocktest.NewMini(t)
	// On miniredis the loss is found at the next renewal, about 200 ms in
	// with a 300 ms expire (on a real server's watched key, at once).
	lock, err := redislock.New(srv.Client(), "copy", redislock.WithExpire(300*time.Millisecond), redislock.WithAutoRenewal())
	if err != nil {
		t.Fatal(err)
	}
	rows, sink := make(chan string), &rowSink{}
	done := make(chan error, 1)
	go func() { done <- copyRows(context.Background(), lock, rows, sink.write) }()
	rows <- "row 1"

	srv.ForceLoss(lock, redislocktest.TakenOver)

	select {
	case err := <-done:
		// What the job must do is stop, for whatever loss: the test asks
		// ErrLost only. (The reason is ErrTakenOver, unless a loaded
		// machine stalls the renewal past the hold's deadline first, and
		// the hold ends as ErrUnreachable: still a loss, still a stop.)
		if !errors.Is(err, redislock.ErrLost) {
			t.Fatalf("copyRows() = %v, want a loss", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the job went on writing after its lock was lost")
	}
	select {
	case rows <- "row 2": // nobody should take it now
		t.Fatal("the job took a row after its lock was lost")
	default:
	}
	if n := sink.count(); n != 1 {
		t.Fatalf("%d rows written, want 1", n)
	}
}

// The job rides out an outage shorter than its lock's expire: the failed
// renewals are retried, and the copy completes.
func TestExampleJobSurvivesAShortOutage(t *testing.T) {
	srv := redislocktest.NewMini(t)
	lock, err := redislock.New(srv.Client(), "copy", redislock.WithExpire(900*time.Millisecond), redislock.WithAutoRenewal())
	if err != nil {
		t.Fatal(err)
	}
	rows, sink := make(chan string), &rowSink{}
	done := make(chan error, 1)
	go func() { done <- copyRows(context.Background(), lock, rows, sink.write) }()
	rows <- "row 1"
	// 650 ms: the renewal due at ~590 ms fails, and a retry (every 90 ms)
	// after the outage succeeds before the ~890 ms deadline.
	srv.Outage(650 * time.Millisecond)
	time.Sleep(700 * time.Millisecond)
	rows <- "row 2"
	close(rows)
	if err := <-done; err != nil {
		t.Fatalf("copyRows() through a short outage = %v, want nil", err)
	}
	if n := sink.count(); n != 2 {
		t.Fatalf("%d rows written, want 2", n)
	}
}
