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
	b.Leave(time.Time{}, false)
	if isClosed(d.Turn()) {
		t.Fatal("d became head while a still was")
	}
	a.Leave(time.Now().Add(5*time.Second), true)
	if got := Queues(); got != before+2 {
		t.Fatalf("Queues() = %d with d still waiting, want %d", got, before+2)
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
	d.Leave(time.Time{}, false)
	other.Leave(time.Time{}, false)
	if got := Queues(); got != before {
		t.Fatalf("Queues() = %d after every waiter left, want %d", got, before)
	}
	// A new waiter makes a new queue, with a token of its own.
	e := Join(c, "lock:q")
	defer e.Leave(time.Time{}, false)
	if e.Queue() == a.Queue() {
		t.Fatal("a waiter joined a queue that had emptied")
	}
	if tok := e.Token(); tok == "" || tok == a.Token() || e.Token() != tok {
		t.Fatal("a queue's token must be its own and stable")
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
	if a.Token() == b.Token() {
		t.Fatal("two queues share a token")
	}
	a.Registered()
	b.Registered()
	if a.Leave(time.Time{}, false) != a.Token() || b.Leave(time.Time{}, false) != b.Token() {
		t.Fatal("a lone registered waiter's Leave must return its token to take back")
	}
}

// A queue's waiters share a token (one registration in Redis) until one of
// them gets in after it may have been registered: the waiters who join
// after that start a new generation, with a token of its own, and each
// generation's last waiter to leave returns its token to be taken back,
// only if it may have been registered. (Else an RWMutex's readers on one
// client that never let their queue empty kept their admission, and the
// writers out, until it lapsed.)
func TestQueueGenerations(t *testing.T) {
	c := noServer(t)
	a, b := Join(c, "lock:g"), Join(c, "lock:g")
	if a.Token() != b.Token() {
		t.Fatal("waiters who joined together must share a token")
	}
	// Never registered: getting in starts no new generation, and nothing
	// is to be taken back.
	if got := a.Leave(time.Time{}, true); got != "" {
		t.Fatalf("Leave of an unregistered generation = %q, want \"\"", got)
	}
	d := Join(c, "lock:g")
	if d.Token() != b.Token() {
		t.Fatal("an unregistered generation must stay the queue's after one got in")
	}
	first := b.Token()
	// b's try found the primitive busy and registered the token; then d
	// gets in (admitted with the token): whoever joins now starts anew.
	b.Registered()
	if got := d.Leave(time.Time{}, true); got != "" {
		t.Fatalf("d's Leave = %q with b still in the generation, want \"\"", got)
	}
	e := Join(c, "lock:g")
	if e.Token() == first {
		t.Fatal("a waiter who joined after a registered generation got in shares its token")
	}
	if got := b.Leave(time.Time{}, true); got != first {
		t.Fatalf("the last of the first generation left with %q, want its token %q", got, first)
	}
	// e's generation was never registered: nothing to take back, though
	// it empties the queue.
	if got := e.Leave(time.Time{}, false); got != "" {
		t.Fatalf("Leave of an unregistered generation = %q, want \"\"", got)
	}
	// A generation that empties while an older one still waits is not
	// joined again: its take-back may be on its way.
	f, g := Join(c, "lock:g"), Join(c, "lock:g")
	f.Registered()
	g.Leave(time.Time{}, true) // got in: f's generation is no longer the queue's
	h := Join(c, "lock:g")
	h.Registered()
	second := h.Token()
	if got := h.Leave(time.Time{}, false); got != second {
		t.Fatalf("h left with %q, want its generation's token %q", got, second)
	}
	k := Join(c, "lock:g") // f still waits: the queue lives on
	if k.Queue() != f.Queue() || k.Token() == second || k.Token() == f.Token() {
		t.Fatal("a waiter joined a generation whose last waiter had left")
	}
	f.Leave(time.Time{}, false)
	k.Leave(time.Time{}, false)
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
