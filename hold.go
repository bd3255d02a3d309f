package redislock

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/watch"
)

// A hold is one acquisition of a Lock, from Acquire to Release or loss. It
// carries what the renewal goroutine and the local expiry timer need, and
// nothing that points back to the Lock, so that a Lock dropped without
// Release can be collected (its cleanup then stops the renewal).
type hold struct {
	client  redis.UniversalClient
	name    string   // the lock's name, for events
	lockKey []string // KEYS of the extend script; the first is the key read by verify
	extend  *redis.Script
	reads   bool // the key holds the owner id: verify reads it
	kind    Kind // for events
	id      string
	start   time.Time     // when its acquire was sent
	ev      *events       // the Lock's observers and logger; nil: none
	expire  time.Duration // 0: the key never expires
	margin  time.Duration // the hold ends this long before the key can expire
	maxEnd  time.Time     // WithMaxHold: no renewal past this; zero: no cap
	token   int64         // fencing token of the acquire; 0 without fencing
	ack     replicaAck

	// evMu guards the two fields below: the hold's end is reported
	// (HoldEnd) only after its start (AcquireEnd), even when it ends first.
	evMu      sync.Mutex
	announced bool  // AcquireEnd has been reported
	endErr    error // the end, while it waits for announced

	done chan struct{} // closed once, when the hold ends

	// extending is a one-slot semaphore: one extend of the key (a renewal
	// or an Extend) in flight at a time, so that their replies are applied
	// in the order Redis ran them, and a late reply never moves the local
	// deadline past what a later extend set.
	extending chan struct{}

	// mu guards the fields below.
	mu      sync.Mutex
	err     error       // why the hold ended; nil while it lasts
	expires time.Time   // local validity deadline; zero for a key without expire
	timer   *time.Timer // runs expireLocally shortly before expires (see checkAt)
	lastErr error       // the last renewal's Redis error, nil after a success
	sending bool        // a renewal has been sent and has not been answered
	capped  bool        // renewal stopped at maxEnd
	until   time.Time   // the end of the last Extend; renewals keep the key at least that long

	watch     *watch.Watch // watches the key; nil when not watched
	unwatched bool         // unwatch was called: never watched again
	checked   time.Time    // the expires the key was last read for (see verify)

	stop       chan struct{}      // closed to stop the renewal goroutine; nil without one
	stopCtx    context.Context    // the renewal's calls run on it; cancelled with stop
	cancelCall context.CancelFunc // cancels stopCtx
	stopOnce   sync.Once
	renewDone  chan struct{} // closed when the renewal goroutine has exited; nil without one
	cleanup    runtime.Cleanup
}

// newHold starts a hold, under id, whose acquire was sent at sent. The local validity
// deadline counts from that moment, as the key's TTL counts from a moment
// after it.
func newHold(l *core, sent time.Time, id string) *hold {
	h := &hold{
		client:  l.client,
		name:    l.name,
		lockKey: l.extendKeys,
		extend:  l.scripts.extend,
		reads:   l.proto.readsOwner(),
		kind:    l.proto.ref(),
		id:      id,
		start:   sent,
		ev:      l.ev,
		expire:  l.expire,
		margin:  l.margin,
		ack:     l.ack,
		done:    make(chan struct{}),

		extending: make(chan struct{}, 1),
	}
	if l.maxHold > 0 {
		h.maxEnd = sent.Add(l.maxHold)
	}
	if h.expire > 0 {
		h.mu.Lock() // the timer's func may run before the assignment returns
		h.expires = sent.Add(h.expire)
		h.timer = time.AfterFunc(time.Until(h.checkAt()), h.expireLocally)
		h.mu.Unlock()
	}
	return h
}

// end ends the hold with err, once: later calls change nothing.
func (h *hold) end(err error) {
	h.mu.Lock()
	first := h.endLocked(err)
	h.mu.Unlock()
	if first {
		h.unwatch()
		h.notifyEnd(err)
	}
}

// endLocked ends the hold with err unless it has ended, and reports
// whether it did. The caller, once it has unlocked h.mu, then calls
// unwatch.
func (h *hold) endLocked(err error) bool {
	if h.err != nil {
		return false
	}
	h.err = err
	if h.timer != nil {
		h.timer.Stop()
	}
	close(h.done)
	return true
}

// ended reports whether the hold has ended.
func (h *hold) ended() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// valid reports whether the hold has not ended and its local validity
// deadline has not passed: until then the key cannot have expired.
func (h *hold) valid() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err == nil && (h.expires.IsZero() || time.Now().Before(h.expires))
}

// Err returns why the hold ended, nil while it lasts.
func (h *hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// setWatch records that w watches h's key. A hold that ended, or was
// unwatched, meanwhile stops w again.
func (h *hold) setWatch(w *watch.Watch) {
	h.mu.Lock()
	ended := h.err != nil || h.unwatched
	if !ended {
		h.watch = w
	}
	h.mu.Unlock()
	if ended {
		w.Stop()
	}
}

// unwatch stops watching h's key. Called before a release is sent, so
// that the watch does not read our own release as a loss, and when the
// hold ends.
func (h *hold) unwatch() {
	h.mu.Lock()
	w := h.watch
	h.watch, h.unwatched = nil, true
	h.mu.Unlock()
	w.Stop()
}

// watching returns h's watch; nil when not watched.
func (h *hold) watching() *watch.Watch {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watch
}

// watched reports whether h's key is watched now.
func (h *hold) watched() bool { return h.watching().Watched() }

// expectBegin and expectEnd bracket an extend of h's key, which the watch,
// if any, must hear of (see watch.Watch.ExpectBegin).
func (h *hold) expectBegin() { h.watching().ExpectBegin() }

func (h *hold) expectEnd(changed bool) { h.watching().ExpectEnd(changed) }

// ID, Lost, Refused and Done make h a watch.Hold.

// ID returns the owner id h holds its key under.
func (h *hold) ID() string { return h.id }

// Lost ends h: the watch found its key gone, or another owner's.
func (h *hold) Lost(gone bool) {
	if gone {
		h.end(lost(ErrExpired))
		return
	}
	h.end(lost(ErrTakenOver))
}

// Refused logs that Redis refused the watch of h's key.
func (h *hold) Refused(err error) { h.ev.watchRefused(h.info(), err) }

// Done is closed when h ends.
func (h *hold) Done() <-chan struct{} { return h.done }

// lossAt is when the hold counts as lost unless renewed: the safety margin
// before the earliest moment the key can expire. Called with h.mu held.
func (h *hold) lossAt() time.Time { return h.expires.Add(-h.margin) }

// notifyEnd reports that the hold ended with err, now if its start has
// been reported, else as soon as it is (see announce).
func (h *hold) notifyEnd(err error) {
	if h.ev == nil {
		return
	}
	h.evMu.Lock()
	if !h.announced {
		h.endErr = err
		h.evMu.Unlock()
		return
	}
	h.evMu.Unlock()
	h.ev.holdEnd(h, err)
}

// announce records that the hold's start has been reported, and reports
// its end if it came first.
func (h *hold) announce() {
	if h.ev == nil {
		return
	}
	h.evMu.Lock()
	h.announced = true
	err := h.endErr
	h.evMu.Unlock()
	if err != nil {
		h.ev.holdEnd(h, err)
	}
}

func lost(reason error) error { return fmt.Errorf("%w: %w", ErrLost, reason) }

// Done returns a channel that is closed when this Lock does not hold the
// lock: it is open from a successful Acquire until the hold ends, by
// Release or by loss. It follows the context.Context contract: every call
// during one hold returns the same channel, which is closed once. Before
// the first acquire it returns a closed channel. A new Acquire starts a new
// hold with a new channel.
//
// The hold is lost, and the channel closed:
//   - within milliseconds when someone else changes the key (a Reset, a
//     DEL, another owner's SET after it expired, an eviction), where the
//     key is watched (WithTracking, on by default);
//   - when auto-renewal finds the key gone or someone else's;
//   - when no renewal succeeded before the expire, less the safety margin
//     (WithSafetyMargin), ran out on the local clock, counted from when the
//     acquire or last renewal was sent: the margin before the key can
//     expire; without auto-renewal, likewise when the expire less the
//     margin runs out. Shortly before (half the margin, at most 50 ms),
//     when no renewal has failed, the key is read once: when it still
//     holds this Lock's id with more than the margin left (another process
//     that shares the id extended it), the hold goes on until then
//     instead. An answer not in by the deadline counts for nothing.
//
// A lock without expire and without a watch is only ended by Release.
func (l *Lock) Done() <-chan struct{} { return l.done() }

// done is Done, for every primitive.
func (l *core) done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hold == nil {
		return l.neverHeld
	}
	return l.hold.done
}

// Err returns nil while the current hold lasts. After Done is closed it
// returns why, and keeps returning the same error until the next Acquire:
// an error matching ErrLost and its reason (ErrExpired, ErrTakenOver,
// ErrUnreachable, ErrMaxHold), ErrReleased after Release, or
// ErrNotAcquired before the first acquire.
func (l *Lock) Err() error { return l.holdErr() }

// holdErr is Err, for every primitive.
func (l *core) holdErr() error {
	l.mu.Lock()
	h := l.hold
	l.mu.Unlock()
	if h == nil {
		return l.wrap(ErrNotAcquired)
	}
	if err := h.Err(); err != nil {
		return l.wrap(err)
	}
	return nil
}
