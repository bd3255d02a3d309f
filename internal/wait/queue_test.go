package wait

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// noServer is a client nothing is sent on: queues use it as a key only.
func noServer(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Waiters of one (client, key) take turns in the order they joined; the
// next head learns what the last one knew of the holder, and the queue
// leaves the registry with its last waiter.
func TestQueueTurnsInJoinOrder(t *testing.T) {
	c := noServer(t)
	before := Queues()
	a, b, d := Join(c, "lock:q"), Join(c, "lock:q"), Join(c, "lock:q")
	other := Join(c, "lock:other")
	if a.Queue() != b.Queue() || a.Queue() == other.Queue() {
		t.Fatal("waiters of one key must share a queue, and only they")
	}
	if !isClosed(a.Turn()) || isClosed(b.Turn()) || isClosed(d.Turn()) || !isClosed(other.Turn()) {
		t.Fatal("only the first waiter of each key is head")
	}
	if got := Queues(); got != before+2 {
		t.Fatalf("Queues() = %d, want %d", got, before+2)
	}
	// A waiter that leaves before its turn passes nothing on.
	if b.Leave(time.Time{}, false) {
		t.Fatal("b was not the last waiter")
	}
	if isClosed(d.Turn()) {
		t.Fatal("d became head while a still was")
	}
	if a.Leave(time.Now().Add(5*time.Second), true) {
		t.Fatal("a was not the last waiter")
	}
	if !isClosed(d.Turn()) {
		t.Fatal("d is not head after a left")
	}
	if !d.AfterAcquire() {
		t.Fatal("d does not know that the head before it acquired")
	}
	if h := d.PTTLHint(); h < 4000 || h > 5000 {
		t.Fatalf("PTTLHint() = %d ms, want about 5000", h)
	}
	if !d.Leave(time.Time{}, false) || !other.Leave(time.Time{}, false) {
		t.Fatal("the last waiters did not empty their queues")
	}
	if got := Queues(); got != before {
		t.Fatalf("Queues() = %d after every waiter left, want %d", got, before)
	}
	// A new waiter makes a new queue, with a token of its own.
	e := Join(c, "lock:q")
	defer e.Leave(time.Time{}, false)
	if e.Queue() == a.Queue() || e.Queue().TokenSent() {
		t.Fatal("a waiter joined a queue that had emptied")
	}
	if tok := e.Queue().Token(); tok == "" || tok == a.Queue().Token() || e.Queue().Token() != tok {
		t.Fatal("a queue's token must be its own and stable")
	}
	if !e.Queue().TokenSent() {
		t.Fatal("TokenSent is false after Token")
	}
	if e.PTTLHint() != 0 || e.AfterAcquire() {
		t.Fatal("a new queue knows nothing of the holder")
	}
}

// uncomparable is a client type that cannot be a map key.
type uncomparable struct {
	redis.UniversalClient
	_ []int
}

// A client whose type cannot be a map key gets a queue per waiter, each
// its own head, rather than a panic.
func TestQueueOfUncomparableClient(t *testing.T) {
	c := uncomparable{UniversalClient: noServer(t)}
	a, b := Join(c, "lock:q"), Join(c, "lock:q")
	if a.Queue() == b.Queue() || !isClosed(a.Turn()) || !isClosed(b.Turn()) {
		t.Fatal("each waiter of an uncomparable client must be its own head")
	}
	if !a.Leave(time.Time{}, false) || !b.Leave(time.Time{}, false) {
		t.Fatal("a lone waiter's Leave must report its queue emptied")
	}
}

// Cleanups.Wait returns once the count is back to zero, or with ctx's
// error when ctx ends first.
func TestCleanupsWait(t *testing.T) {
	var c Cleanups
	if err := c.Wait(context.Background()); err != nil {
		t.Fatalf("Wait with nothing running: %v", err)
	}
	c.Add()
	c.Add()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ended := make(chan error, 1)
	go func() { ended <- c.Wait(ctx) }()
	select {
	case err := <-ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait with two running and ctx ending: %v, want DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return 10 s after its context ended")
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait(context.Background()) }()
	c.Done()
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) with one still running", err)
	case <-time.After(20 * time.Millisecond):
	}
	c.Done()
	if err := <-done; err != nil {
		t.Fatalf("Wait after both ended: %v", err)
	}
}
