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
	waiters  []*Ticket   // waiters[0] is the head
	dead     bool        // removed from the registry; join a new one
	expires  time.Time   // when the holder's key expires, as last seen; zero: unknown
	acquired bool        // the last head to leave had acquired
	gen      *generation // the generation a waiter joins; nil: a new one

	shut     chan struct{} // closed by Close: every waiter of the queue ends
	shutOnce sync.Once

	// abandons counts the waits of this queue's waiters that were
	// abandoned and are still being finished (see core.abandonWait).
	Abandons Cleanups
}

// A Ticket is one waiter's place in a queue.
type Ticket struct {
	q    *Queue
	gen  *generation   // guarded by q.mu
	turn chan struct{} // closed when the waiter becomes head
}

// A generation is the waiters of a queue that joined under one token (see
// Ticket.Token). A queue's waiters join its current generation until one
// of them acquires after the generation may have been registered in
// Redis: later waiters start a new one. So a registration that Redis
// admitted (an RWMutex's waiting readers, let in ahead of waiting writers
// at a writer's release) stands for the waiters who were waiting then,
// and is taken back once they are in, not kept as long as the queue
// never empties.
type generation struct {
	token      string // "" until asked for
	n          int    // the queue's waiters in it
	registered bool   // a try with its token may have registered it
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
		q.join(t)
		close(t.turn)
		return t
	}
	for {
		v, ok := registry.Load(qk) // a new Queue only when there is none: most waits find one
		if !ok {
			v, _ = registry.LoadOrStore(qk, &Queue{qk: qk, shut: make(chan struct{})})
		}
		q := v.(*Queue)
		q.mu.Lock()
		if q.dead {
			q.mu.Unlock()
			continue
		}
		t := &Ticket{q: q, turn: make(chan struct{})}
		q.waiters = append(q.waiters, t)
		q.join(t)
		if len(q.waiters) == 1 {
			close(t.turn)
		}
		q.mu.Unlock()
		return t
	}
}

// join puts t in q's current generation. q.mu is held.
func (q *Queue) join(t *Ticket) {
	if q.gen == nil {
		q.gen = &generation{}
	}
	t.gen = q.gen
	t.gen.n++
}

// Leave takes t out of its queue. If t was the head, the next waiter
// becomes head; expires is what t last learned of the holder's expiry, and
// acquired whether it acquired, for it. An empty queue leaves the
// registry. When t was the last of its generation and the generation may
// be registered in Redis (see Registered), Leave returns its token, for
// the caller to take the registration back; else "".
func (t *Ticket) Leave(expires time.Time, acquired bool) (lastOf string) {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	g := t.gen
	g.n--
	if q.gen == g && (g.n == 0 || (acquired && g.registered)) {
		// Done with, or got in: whoever joins now waits anew.
		q.gen = nil
	}
	if g.n == 0 && g.registered {
		lastOf = g.token
	}
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
	return lastOf
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

// Token returns the token that stands, in Redis, for t and the other
// waiters of its generation (see generation): made when first asked for,
// it is never reused, so that a registration taken back for an old
// generation never removes a newer one's. "" for a nil t.
func (t *Ticket) Token() string {
	if t == nil {
		return ""
	}
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	if t.gen.token == "" {
		t.gen.token = uuid.NewString()
	}
	return t.gen.token
}

// Registered records that a try with t's token may have registered its
// generation in Redis (it found the primitive busy, or its reply was
// lost): the last of the generation to leave takes it back. Nothing for a
// nil t.
func (t *Ticket) Registered() {
	if t == nil {
		return
	}
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	t.gen.registered = true
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
