package hold

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/watch"
)

// A Hold is one acquisition of a lock (a Lock, a Semaphore's permit, an
// RWMutex's read or write side), from its acquire to its release or loss.
// It carries what the renewal goroutine and the local expiry timer need,
// and nothing that points back to its primitive, so that a primitive
// dropped without a release can be collected (its cleanup then stops the
// renewal: see Abandon).
type Hold struct {
	client  redis.UniversalClient
	lockKey []string // KEYS of the extend script; the first is the key read by verify
	extend  *redis.Script
	reads   bool // the key holds the owner id: verify reads it
	id      string
	start   time.Time     // when its acquire was sent
	ev      Events        // the primitive's observers and logger; nil: none
	expire  time.Duration // 0: the key never expires
	margin  time.Duration // the hold ends this long before the key can expire
	maxEnd  time.Time     // WithMaxHold: no renewal past this; zero: no cap
	token   int64         // fencing token of the acquire; 0 without fencing
	ack     Acker

	// evMu guards the two fields below: the hold's end is reported
	// (Events.End) only after its start (Announce), even when it ends
	// first.
	evMu      sync.Mutex
	announced bool  // its start has been reported
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

// Config is what a Hold is made of.
type Config struct {
	Client redis.UniversalClient
	Keys   []string      // KEYS of the extend script; the first is the one verify reads
	Extend *redis.Script // ARGV: the id, the new expire in milliseconds
	Reads  bool          // the first key holds the owner id
	Expire time.Duration // 0: the key never expires
	Margin time.Duration // the safety margin (WithSafetyMargin)
	Max    time.Duration // WithMaxHold; 0: no cap
	Token  int64         // the fencing token of the acquire
	Ack    Acker         // how extends are sent (and acknowledged by replicas)
	Events Events        // nil: none
}

// An Acker runs a script and, where the primitive asks replicas to
// acknowledge its writes, waits for them: ackErr says they did not.
type Acker interface {
	Run(ctx context.Context, client redis.UniversalClient, s *redis.Script, keys []string, args ...any) (cmd *redis.Cmd, ackErr error)
}

// Events is what a Hold reports to its primitive's observers and logger.
type Events interface {
	End(h *Hold, err error) // once per hold, after Announce
	WatchRefused(h *Hold, err error)
	RenewalStart(h *Hold, every time.Duration)
	RenewalExit(h *Hold)
	ExtendStart(ctx context.Context, h *Hold, by time.Duration) context.Context
	ExtendEnd(ctx context.Context, h *Hold, by time.Duration, n int64, err error, left time.Duration, retrying bool)
}

// New starts a hold of c under id, whose acquire was sent at sent. The
// local validity deadline counts from that moment, as the key's TTL counts
// from a moment after it.
func New(c Config, sent time.Time, id string) *Hold {
	h := &Hold{
		client:  c.Client,
		lockKey: c.Keys,
		extend:  c.Extend,
		reads:   c.Reads,
		id:      id,
		start:   sent,
		ev:      c.Events,
		expire:  c.Expire.Truncate(time.Millisecond), // what Redis counts
		margin:  c.Margin,
		token:   c.Token,
		ack:     c.Ack,
		done:    make(chan struct{}),

		extending: make(chan struct{}, 1),
	}
	if c.Max > 0 {
		h.maxEnd = sent.Add(c.Max)
	}
	if h.expire > 0 {
		h.mu.Lock() // the timer's func may run before the assignment returns
		h.expires = sent.Add(h.expire)
		h.timer = time.AfterFunc(time.Until(h.checkAt()), h.expireLocally)
		h.mu.Unlock()
	}
	return h
}

// Key returns the hold's key (the one verify reads).
func (h *Hold) Key() string { return h.lockKey[0] }

// Token returns the fencing token of the hold's acquire (0 without).
func (h *Hold) Token() int64 { return h.token }

// Start returns when the hold's acquire was sent.
func (h *Hold) Start() time.Time { return h.start }

// End ends the hold with err, once: later calls change nothing.
func (h *Hold) End(err error) {
	h.mu.Lock()
	first := h.endLocked(err)
	h.mu.Unlock()
	if first {
		h.Unwatch()
		h.notifyEnd(err)
	}
}

// endLocked ends the hold with err unless it has ended, and reports
// whether it did. The caller, once it has unlocked h.mu, then calls
// unwatch.
func (h *Hold) endLocked(err error) bool {
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

// Ended reports whether the hold has ended.
func (h *Hold) Ended() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// Valid reports whether the hold has not ended and its local validity
// deadline has not passed: until then the key cannot have expired.
func (h *Hold) Valid() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err == nil && (h.expires.IsZero() || time.Now().Before(h.expires))
}

// Err returns why the hold ended, nil while it lasts.
func (h *Hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// SetWatch records that w watches h's key. A hold that ended, or was
// unwatched, meanwhile stops w again.
func (h *Hold) SetWatch(w *watch.Watch) {
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

// Unwatch stops watching h's key. Called before a release is sent, so
// that the watch does not read our own release as a loss, and when the
// hold ends.
func (h *Hold) Unwatch() {
	h.mu.Lock()
	w := h.watch
	h.watch, h.unwatched = nil, true
	h.mu.Unlock()
	w.Stop()
}

// watching returns h's watch; nil when not watched.
func (h *Hold) watching() *watch.Watch {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watch
}

// Watched reports whether h's key is watched now.
func (h *Hold) Watched() bool { return h.watching().Watched() }

// ExpectBegin and ExpectEnd bracket an extend of h's key, which the watch,
// if any, must hear of (see watch.Watch.ExpectBegin).
func (h *Hold) ExpectBegin() { h.watching().ExpectBegin() }

// ExpectEnd: see ExpectBegin.
func (h *Hold) ExpectEnd(changed bool) { h.watching().ExpectEnd(changed) }

// ID, Lost, Refused and Done make h a watch.Hold.

// ID returns the owner id h holds its key under.
func (h *Hold) ID() string { return h.id }

// Lost ends h: the watch found its key gone, or another owner's.
func (h *Hold) Lost(gone bool) {
	if gone {
		h.End(LostErr(ErrExpired))
		return
	}
	h.End(LostErr(ErrTakenOver))
}

// Refused logs that Redis refused the watch of h's key.
func (h *Hold) Refused(err error) {
	if h.ev != nil {
		h.ev.WatchRefused(h, err)
	}
}

// Done is closed when h ends.
func (h *Hold) Done() <-chan struct{} { return h.done }

// lossAt is when the hold counts as lost unless renewed: the safety margin
// before the earliest moment the key can expire. Called with h.mu held.
func (h *Hold) lossAt() time.Time { return h.expires.Add(-h.margin) }

// notifyEnd reports that the hold ended with err, now if its start has
// been reported, else as soon as it is (see announce).
func (h *Hold) notifyEnd(err error) {
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
	h.ev.End(h, err)
}

// Announce records that the hold's start has been reported, and reports
// its end if it came first.
func (h *Hold) Announce() {
	if h.ev == nil {
		return
	}
	h.evMu.Lock()
	h.announced = true
	err := h.endErr
	h.evMu.Unlock()
	if err != nil {
		h.ev.End(h, err)
	}
}

// LostErr is the error of a hold lost for reason: it matches ErrLost and
// reason, and says "redislock: " once.
func LostErr(reason error) error { return lostError{reason} }

type lostError struct{ reason error }

func (e lostError) Error() string {
	return ErrLost.Error() + ": " + strings.TrimPrefix(e.reason.Error(), "redislock: ")
}

func (e lostError) Unwrap() []error { return []error{ErrLost, e.reason} }

// TakeExtending waits for h's extend slot, one extend of a hold in flight
// at a time (see Hold.extending), and returns the func that gives it
// back; a hold that ends meanwhile needs none. It returns ctx's error when
// ctx ends first.
func (h *Hold) TakeExtending(ctx context.Context) (func(), error) {
	select {
	case h.extending <- struct{}{}:
		return func() { <-h.extending }, nil
	case <-h.done:
		return func() {}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// EndReleased ends h after its release: lost for reason, or, when the
// release got no reply (err without reason), neither held nor released
// as far as we can tell (the key may be ours until a Release that is
// answered, or its expire); else released.
func (h *Hold) EndReleased(reason, err error) {
	switch {
	case reason != nil:
		h.End(LostErr(reason))
	case err != nil:
		h.End(LostErr(fmt.Errorf("%w: the release got no reply: %w", ErrUnreachable, err)))
	default:
		h.End(ErrReleased)
	}
}
