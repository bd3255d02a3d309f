package redislock

import (
	"reflect"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Local wait queues.
//
// A BLPOP holds a pooled connection for its whole slice, so goroutines of
// one process that wait for one lock through one client would each hold a
// connection, and a busy lock could drain the pool. Instead they queue
// here: the head of the queue of a (client, lock key) waits in Redis, the
// others wait on a channel, and when the head leaves (it acquired, or its
// context ended) the next one becomes head. Between processes, Redis
// serves the heads' BLPOPs in arrival order.
//
// The registry is the package's one piece of process-wide state, like a
// connection pool: it holds a queue only while someone waits in it.
var waitQueues sync.Map // queueKey -> *waitQueue

type queueKey struct {
	client redis.UniversalClient
	key    string
}

// waitQueue is the FIFO of the local waiters of one (client, lock key).
type waitQueue struct {
	qk queueKey

	// mu guards the fields below.
	mu       sync.Mutex
	waiters  []*ticket // waiters[0] is the head
	dead     bool      // removed from the registry; join a new one
	expires  time.Time // when the holder's key expires, as last seen; zero: unknown
	acquired bool      // the last head to leave had acquired
	token    string    // see queueToken; "" until asked for

	// abandons counts the waits of this queue's waiters that were
	// abandoned and are still being finished (see core.abandonWait).
	abandons cleanups
}

// A ticket is one waiter's place in a queue.
type ticket struct {
	q    *waitQueue
	turn chan struct{} // closed when the waiter becomes head
}

// joinQueue puts a waiter at the end of the queue of (client, key); the
// ticket's turn channel is closed at once if it is the only one. A client
// whose type cannot be a map key gets a queue of its own for each waiter.
func joinQueue(client redis.UniversalClient, key string) *ticket {
	qk := queueKey{client: client, key: key}
	if !reflect.TypeOf(client).Comparable() {
		q := &waitQueue{qk: qk, dead: true}
		t := &ticket{q: q, turn: make(chan struct{})}
		q.waiters = []*ticket{t}
		close(t.turn)
		return t
	}
	for {
		v, _ := waitQueues.LoadOrStore(qk, &waitQueue{qk: qk})
		q := v.(*waitQueue)
		q.mu.Lock()
		if q.dead {
			q.mu.Unlock()
			continue
		}
		t := &ticket{q: q, turn: make(chan struct{})}
		q.waiters = append(q.waiters, t)
		if len(q.waiters) == 1 {
			close(t.turn)
		}
		q.mu.Unlock()
		return t
	}
}

// leave takes t out of its queue. If t was the head, the next waiter
// becomes head; expires is what t last learned of the holder's expiry, and
// acquired whether it acquired, for it. An empty queue leaves the registry;
// leave reports whether t was the last in it.
func (t *ticket) leave(expires time.Time, acquired bool) (emptied bool) {
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
		waitQueues.CompareAndDelete(q.qk, q)
	}
	return len(q.waiters) == 0
}

// afterAcquire reports whether the head that left before t became head
// had acquired.
func (t *ticket) afterAcquire() bool {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.q.acquired
}

// pttlHint returns what the previous head knew of the holder's remaining
// TTL in milliseconds, 0 when it knew nothing.
func (t *ticket) pttlHint() int64 {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	if t.q.expires.IsZero() {
		return 0
	}
	return max(time.Until(t.q.expires).Milliseconds(), 1)
}

// queueToken returns a token that stands, in Redis, for the waiters of
// this queue (see protocol.queueRegisters): made when first asked for, it
// lives and dies with the queue, so that a registration taken back for an
// old queue never removes a newer one's.
func (q *waitQueue) queueToken() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.token == "" {
		q.token = uuid.NewString()
	}
	return q.token
}

// tokenSent reports whether q's token was made, and so may have been sent
// in a try that registered it.
func (q *waitQueue) tokenSent() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.token != ""
}

// queue returns t's queue; nil for a nil t.
func (t *ticket) queue() *waitQueue {
	if t == nil {
		return nil
	}
	return t.q
}
