package watch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
)

const (
	invalidateChannel = "__redis__:invalidate"

	// trackerIdle is how long a tracker's connections are kept after its
	// last watched hold ended.
	trackerIdle = 30 * time.Second

	// trackerUnavailableRetry is how long a tracker that Redis refused
	// (an error reply while setting up) waits before it tries again.
	trackerUnavailableRetry = time.Minute

	// runLinger is how long a tracker's goroutines run on after its last
	// hold ended, for the next one.
	runLinger = time.Second

	// armDelay is how long a new hold's key waits for its first read: a
	// hold that ends sooner (a short job, a tight loop) costs no read. A
	// change of the key before the read is seen by the read itself.
	armDelay = 2 * time.Millisecond

	// idlePing is how long a tracker's connection may stay idle before it
	// is pinged: the subscriber after so long without a message (three
	// unanswered in a row count as a broken connection), the reader after
	// so long without a read. A lock renewed more often than that (an
	// expire up to 90 s) never causes one.
	idlePing = time.Minute

	// peekEvery is how often a tracker looks at its reader's sockets.
	peekEvery = time.Second

	// expectWithin is how soon the invalidation of our own change must
	// come (see expectBegin).
	expectWithin = time.Second

	// trackerTimeout bounds each of the tracker's own commands.
	trackerTimeout = 2 * time.Second

	// minReread and maxReread bound the pause before a key invalidated
	// again without a change is read again (see tracker.spurious).
	minReread = 10 * time.Millisecond
	maxReread = time.Second

	// handOverAfter is how many connection attempts in a row a cluster
	// node's tracker makes before it hands its holds over (see handOver).
	handOverAfter = 3
)

// A tracker watches the keys of the holds of one client on one node.
type tracker struct {
	k      registry.Key // in the registry: one tracker per (user client, node)
	server serverID
	opt    redis.Options // the node's, copied

	// pokes counts pokes, rounds the rounds of run's loop (each after a
	// wake-up), and wakeFires the wake timer's firings, for the tests (one
	// atomic add: cheaper than the wake-up).
	pokes, rounds, wakeFires atomic.Int64

	kick chan struct{} // one slot: work for run

	// mu guards the fields below.
	mu      sync.Mutex
	holds   map[string]map[*Watch]uint64 // watched key -> its holds, each with its registration number
	seq     uint64                       // registration numbers given so far
	dirty   map[string]struct{}          // keys to read again
	expect  map[string]time.Time         // our own change of the key: its invalidation is due by then
	armAt   map[string]time.Time         // a new hold's key: first read not before then (armDelay)
	tracked map[string]bool              // read since its last invalidation: Redis will report its next change
	// spurious counts, per key, the invalidations in a row that no change
	// of ours explains: a re-read finds the key unchanged (Redis evicted
	// it from a full tracking table, tracking-table-max-keys). From the
	// second, its re-read waits until rereadAt, doubling from 10 ms to 1 s,
	// so that a table too small cannot turn re-reads into a loop.
	spurious map[string]int
	rereadAt map[string]time.Time
	all      bool          // read every watched key again
	running  bool          // run's goroutine is live
	exited   chan struct{} // closed when the last run has exited
	conns    *trackConns   // nil until connected, and after closing
	refused  error         // Redis refused tracking; retry after retryAt
	retryAt  time.Time
	idle     *time.Timer // closes the connections after trackerIdle
	wake     *time.Timer // pokes run at wakeAt when it has work by then (see wakeFired)
	wakeAt   time.Time   // when wake fires; zero when it is not pending
	// emptySince is when the last hold ended, zero while holds are
	// watched: run lingers runLinger after it, then exits.
	emptySince time.Time
	// lingering: run's last round found no hold, and it sleeps out its
	// linger (see round), which ends on its own timer. Holds that come
	// and go before their keys' first read then wake nobody.
	lingering bool
	closed    bool // out of the registry: make a new one
	retire    bool // close as soon as no hold is left (another tracker of the server is idle now)
}

type addResult int

const (
	addOK addResult = iota
	addUnavailable
	addClosed
)

func (t *tracker) add(key string, h *Watch) addResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return addClosed
	case t.refused != nil && time.Now().Before(t.retryAt):
		return addUnavailable
	}
	hs := t.holds[key]
	if hs == nil {
		hs = map[*Watch]uint64{}
		t.holds[key] = hs
	}
	t.seq++
	hs[h] = t.seq
	t.dirty[key] = struct{}{}
	if _, ok := t.armAt[key]; !ok {
		t.armAt[key] = time.Now().Add(armDelay)
	}
	if t.idle != nil {
		t.idle.Stop()
		t.idle = nil
	}
	t.retire = false
	t.emptySince = time.Time{}
	// run has nothing to do for the key before its first read: the wake
	// timer pokes it then, if the hold is still on (a hold that ends
	// sooner wakes nobody).
	t.wakeByLocked(t.armAt[key])
	if !t.running {
		t.running = true
		prev := t.exited
		t.exited = make(chan struct{})
		go t.run(prev, t.exited)
	}
	return addOK
}

// remove stops watching key for h; a no-op when it was not watched.
func (t *tracker) remove(key string, h *Watch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	hs := t.holds[key]
	if _, ok := hs[h]; !ok {
		return
	}
	delete(hs, h)
	if len(hs) == 0 {
		t.dropKeyLocked(key)
	}
	if len(t.holds) == 0 {
		t.emptiedLocked()
		if t.lingering {
			// run sleeps out its linger already, counting from
			// emptySince when it wakes; nothing is left for the wake
			// timer (a worker whose holds end before their first read,
			// each followed by a wait, set it twice a cycle: once for
			// the first read, once to tell run it was idle).
			t.stopWakeLocked()
			return
		}
		// run lingers, then exits: it need not know at once (a hold taken
		// again within armDelay keeps it busy without a wake-up).
		t.wakeByLocked(t.emptySince.Add(armDelay))
	}
}

// stopWakeLocked stops the wake timer: nothing pending. t.mu is held.
func (t *tracker) stopWakeLocked() {
	if t.wake != nil {
		t.wake.Stop()
	}
	t.wakeAt = time.Time{}
}

// dropKeyLocked forgets key, whose last hold is no longer watched: a
// first read still due for it (armAt) would otherwise have the wake timer
// poke run for nothing, every time it fires. t.mu is held.
func (t *tracker) dropKeyLocked(key string) {
	delete(t.holds, key)
	delete(t.dirty, key)
	delete(t.expect, key)
	delete(t.armAt, key)
	delete(t.tracked, key)
	delete(t.spurious, key)
	delete(t.rereadAt, key)
}

// emptiedLocked records when the tracker was left without holds, if it
// is: run's linger counts from then. t.mu is held.
func (t *tracker) emptiedLocked() {
	if len(t.holds) == 0 && t.emptySince.IsZero() {
		t.emptySince = time.Now()
	}
}

// wakeByLocked has the wake timer fire no later than at, which is all run
// needs for a change that is not due before at: the timer then pokes run
// if it has work (see wakeFired). A wake-up pending for at or earlier
// already does; none pending, or one later, is (re)set. It is cheaper than
// a poke: no goroutine runs until the timer fires, and one timer serves
// every change until then. t.mu is held.
func (t *tracker) wakeByLocked(at time.Time) {
	if !t.wakeAt.IsZero() && !t.wakeAt.After(at) {
		return
	}
	t.wakeAt = at
	d := time.Until(at)
	if t.wake == nil {
		t.wake = time.AfterFunc(d, t.wakeFired)
		return
	}
	t.wake.Reset(d)
}

// wakeFired is the wake timer's function: it pokes run when run has work
// by now (see dueLocked), and otherwise sets the timer again for when it
// will. In a tight acquire/release loop beside a hold that lasts, every
// hold of the loop ends before its key's first read: the timer fires about
// once per armDelay, whatever the loop's rate (it is set again for the
// first read of the hold it finds, which may be a cycle old), and run is
// not woken at all (a wake-up of run costs its timers, a look at its
// sockets and a goroutine switch, often on the other core).
func (t *tracker) wakeFired() {
	t.wakeFires.Add(1)
	t.mu.Lock()
	t.wakeAt = time.Time{}
	due, next := t.dueLocked(time.Now())
	if !due && !next.IsZero() {
		t.wakeByLocked(next)
	}
	t.mu.Unlock()
	if due {
		t.poke()
	}
}

// dueLocked reports whether run has work by now that only the wake timer
// tells it of: a new hold's key to read for the first time (see armDelay),
// a key whose re-read was put off (see spurious), or no hold left for armDelay (run then lingers, and exits runLinger
// after the last hold ended). Otherwise next is when it will, zero for
// never: holds whose keys are read already are run's work only when an
// invalidation or a poke comes. t.mu is held.
func (t *tracker) dueLocked(now time.Time) (due bool, next time.Time) {
	if len(t.holds) == 0 {
		if !t.running || t.lingering {
			return false, time.Time{}
		}
		at := t.emptySince.Add(armDelay)
		return !now.Before(at), at
	}
	for _, pending := range [...]map[string]time.Time{t.armAt, t.rereadAt} {
		for _, at := range pending {
			if !now.Before(at) {
				return true, time.Time{}
			}
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return false, next
}

// poke wakes run without blocking.
func (t *tracker) poke() {
	t.pokes.Add(1)
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// markAll has every watched key read again.
func (t *tracker) markAll() {
	t.mu.Lock()
	t.all = true
	clear(t.expect)
	clear(t.armAt)
	clear(t.tracked)
	clear(t.rereadAt)
	t.mu.Unlock()
	t.poke()
}

// expectBegin records that we are about to change key (a renewal or an
// Extend is being sent), and expectEnd(key, changed) that the reply came:
// when the change was made (changed), Redis must send its invalidation
// within expectWithin of the reply, as it does for any change of a tracked
// key, unless it already came. When none comes, the watch is not working
// (the reader's connection died without a word, say) and every key is read
// again, which replaces a dead connection and tracks them anew. The
// invalidation may come before the reply: it is counted from expectBegin.
func (t *tracker) expectBegin(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Only a tracked key's change is reported: one not read yet (a new
	// hold's, see armDelay) or not read again since its last invalidation
	// has nothing to expect; its read is on its way.
	// A change made while an earlier one's invalidation is still due
	// keeps that deadline: were it moved on, a holder that renews more
	// often than expectWithin would never find a dead subscriber.
	if _, due := t.expect[key]; t.tracked[key] && !due {
		t.expect[key] = time.Time{} // pending: no deadline until the reply
	}
}

func (t *tracker) expectEnd(key string, changed bool) {
	t.mu.Lock()
	due, ok := t.expect[key]
	switch {
	case !ok: // its invalidation came already, or the key is no longer watched
	case !changed:
		delete(t.expect, key)
	case due.IsZero():
		t.expect[key] = time.Now().Add(expectWithin)
	}
	t.mu.Unlock()
	if ok && changed {
		t.poke() // run sets its timer
	}
}

// overdue reports whether an expected invalidation is late, and when the
// next one is due (zero: none expected). A new hold's first read is not
// waited for here: the wake timer pokes run for it (see wakeFired).
func (t *tracker) overdue() (late bool, next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for _, due := range t.expect {
		if due.IsZero() {
			continue // its change is still in flight
		}
		if now.After(due) {
			return true, time.Time{}
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return false, next
}

// markKeys has keys read again, those that are watched.
func (t *tracker) markKeys(keys []string) {
	t.mu.Lock()
	n := 0
	now := time.Now()
	for _, k := range keys {
		if _, ours := t.expect[k]; ours {
			delete(t.spurious, k)
		} else if _, held := t.holds[k]; held {
			t.spurious[k]++
			if c := t.spurious[k]; c > 1 {
				t.rereadAt[k] = now.Add(min(minReread<<min(c-2, 10), maxReread))
			}
		}
		delete(t.expect, k)
		delete(t.armAt, k)
		delete(t.tracked, k)
		if _, ok := t.holds[k]; ok {
			t.dirty[k] = struct{}{}
			n++
		}
	}
	t.mu.Unlock()
	if n > 0 {
		t.poke()
	}
}
