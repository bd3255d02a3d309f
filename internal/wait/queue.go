package wait

import (
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
)

// Queue is the FIFO of the local waiters of one (client, lock key). The
// registry holds it while someone waits in it.
type Queue struct {
	qk registry.Key

	// mu guards the fields below.
	mu       sync.Mutex
	waiters  []*Ticket // waiters[0] is the head
	dead     bool      // removed from the registry; join a new one
	expires  time.Time // when the holder's key expires, as last seen; zero: unknown
	acquired bool      // the last head to leave had acquired
	token    string    // see Token; "" until asked for

	shut     chan struct{} // closed by Close: every waiter of the queue ends
	shutOnce sync.Once

	// abandons counts the waits of this queue's waiters that were
	// abandoned and are still being finished (see core.abandonWait).
	Abandons Cleanups
}

// A Ticket is one waiter's place in a queue.
type Ticket struct {
	q    *Queue
	turn chan struct{} // closed when the waiter becomes head
}

// Join puts a waiter at the end of the queue of (client, key); the
// Ticket's turn channel is closed at once if it is the only one. A client
// whose type cannot be a map key gets a queue of its own for each waiter.
func Join(client redis.UniversalClient, key string) *Ticket {
	qk := registry.Key{Kind: registry.Queue, Client: client, Sub: key}
	if !registry.Keyable(client) {
		q := &Queue{qk: qk, dead: true, shut: make(chan struct{})}
		t := &Ticket{q: q, turn: make(chan struct{})}
		q.waiters = []*Ticket{t}
		close(t.turn)
		return t
	}
	for {
		v, _ := registry.LoadOrStore(qk, &Queue{qk: qk, shut: make(chan struct{})})
		q := v.(*Queue)
		q.mu.Lock()
		if q.dead {
			q.mu.Unlock()
			continue
		}
		t := &Ticket{q: q, turn: make(chan struct{})}
		q.waiters = append(q.waiters, t)
		if len(q.waiters) == 1 {
			close(t.turn)
		}
		q.mu.Unlock()
		return t
	}
}

// Leave takes t out of its queue. If t was the head, the next waiter
// becomes head; expires is what t last learned of the holder's expiry, and
// acquired whether it acquired, for it. An empty queue leaves the registry;
// Leave reports whether t was the last in it.
func (t *Ticket) Leave(expires time.Time, acquired bool) (emptied bool) {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, w := range q.waiters {
		if w != t {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 {
			q.expires, q.acquired = expires, acquired
			if len(q.waiters) > 0 {
				close(q.waiters[0].turn)
			}
		}
		break
	}
	if len(q.waiters) == 0 && !q.dead {
		q.dead = true
		registry.CompareAndDelete(q.qk, q)
	}
	return len(q.waiters) == 0
}

// AfterAcquire reports whether the head that left before t became head
// had acquired.
func (t *Ticket) AfterAcquire() bool {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.q.acquired
}

// PTTLHint returns what the previous head knew of the holder's remaining
// TTL in milliseconds, 0 when it knew nothing.
func (t *Ticket) PTTLHint() int64 {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	if t.q.expires.IsZero() {
		return 0
	}
	return max(time.Until(t.q.expires).Milliseconds(), 1)
}

// Token returns a token that stands, in Redis, for the waiters of
// this queue (see protocol.queueRegisters): made when first asked for, it
// lives and dies with the queue, so that a registration taken back for an
// old queue never removes a newer one's.
func (q *Queue) Token() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.token == "" {
		q.token = uuid.NewString()
	}
	return q.token
}

// TokenSent reports whether q's token was made, and so may have been sent
// in a try that registered it.
func (q *Queue) TokenSent() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.token != ""
}

// Queue returns t's queue; nil for a nil t.
func (t *Ticket) Queue() *Queue {
	if t == nil {
		return nil
	}
	return t.q
}

// Turn is closed when t becomes the head of its queue.
func (t *Ticket) Turn() <-chan struct{} { return t.turn }

// Shut is closed when the queue was closed (see Close): its waiters end
// with ErrShutdown, the head's wait in Redis included.
func (t *Ticket) Shut() <-chan struct{} { return t.q.shut }

// IsShut reports whether Shut is closed.
func (t *Ticket) IsShut() bool {
	select {
	case <-t.q.shut:
		return true
	default:
		return false
	}
}

// shutDown takes q out of the registry and ends its waiters (see Shut):
// a waiter that comes later joins a new queue.
func (q *Queue) shutDown() {
	q.mu.Lock()
	q.dead = true
	q.mu.Unlock()
	registry.CompareAndDelete(q.qk, q)
	q.shutOnce.Do(func() { close(q.shut) })
}
