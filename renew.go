package redislock

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A hold is one acquisition of a Lock, from Acquire to Release or loss. It
// carries what the renewal goroutine and the local expiry timer need, and
// nothing that points back to the Lock, so that a Lock dropped without
// Release can be collected (its cleanup then stops the renewal).
type hold struct {
	client  redis.UniversalClient
	lockKey []string // KEYS of the extend script
	id      string
	expire  time.Duration // 0: the key never expires
	maxEnd  time.Time     // WithMaxHold: no renewal past this; zero: no cap
	token   int64         // fencing token of the acquire; 0 without fencing
	ack     replicaAck

	done chan struct{} // closed once, when the hold ends

	// mu guards the fields below.
	mu      sync.Mutex
	err     error       // why the hold ended; nil while it lasts
	expires time.Time   // local validity deadline; zero for a key without expire
	timer   *time.Timer // fires at expires
	lastErr error       // the last renewal's Redis error, nil after a success
	sending bool        // a renewal has been sent and has not been answered
	capped  bool        // renewal stopped at maxEnd

	stop      chan struct{} // closed to stop the renewal goroutine; nil without one
	stopOnce  sync.Once
	renewDone chan struct{} // closed when the renewal goroutine has exited; nil without one
	cleanup   runtime.Cleanup
}

// newHold starts a hold whose acquire was sent at sent. The local validity
// deadline counts from that moment, as the key's TTL counts from a moment
// after it.
func newHold(l *Lock, sent time.Time) *hold {
	h := &hold{
		client:  l.client,
		lockKey: l.keys[:1],
		id:      l.id,
		expire:  l.expire,
		ack:     l.ack,
		done:    make(chan struct{}),
	}
	if l.maxHold > 0 {
		h.maxEnd = sent.Add(l.maxHold)
	}
	if h.expire > 0 {
		h.mu.Lock() // the timer's func may run before the assignment returns
		h.expires = sent.Add(h.expire)
		h.timer = time.AfterFunc(time.Until(h.expires), h.expireLocally)
		h.mu.Unlock()
	}
	return h
}

// startRenewal starts the renewal goroutine for a hold acquired at sent. It
// returns ErrAlreadyStarted, starting nothing, when the hold already has
// one.
func (h *hold) startRenewal(sent time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.renewDone != nil {
		return ErrAlreadyStarted
	}
	h.stop, h.renewDone = make(chan struct{}), make(chan struct{})
	go h.renew(sent, h.stop)
	return nil
}

// stopRenewal stops the renewal goroutine, if any, and waits for it to
// exit. Safe to call more than once and from several goroutines.
func (h *hold) stopRenewal() {
	h.mu.Lock()
	stop, done := h.stop, h.renewDone
	h.mu.Unlock()
	if stop != nil {
		h.stopOnce.Do(func() { close(stop) })
		<-done
	}
}

// abandon is the cleanup of a Lock collected while holding: it stops the
// renewal without waiting (cleanups must not block) and the local timer.
// The key expires on its own.
func abandon(h *hold) {
	h.mu.Lock()
	stop := h.stop
	if h.timer != nil {
		h.timer.Stop()
	}
	h.mu.Unlock()
	if stop != nil {
		h.stopOnce.Do(func() { close(stop) })
	}
}

// end ends the hold with err, once: later calls change nothing.
func (h *hold) end(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLocked(err)
}

func (h *hold) endLocked(err error) {
	if h.err != nil {
		return
	}
	h.err = err
	if h.timer != nil {
		h.timer.Stop()
	}
	close(h.done)
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

// Err returns why the hold ended, nil while it lasts.
func (h *hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// expireLocally runs when the local validity deadline passes: unless a
// renewal moved the deadline meanwhile, the hold is lost.
func (h *hold) expireLocally() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil || time.Now().Before(h.expires) {
		return
	}
	var reason error
	switch {
	case h.capped:
		reason = ErrMaxHold
	case h.lastErr != nil:
		reason = fmt.Errorf("%w: %w", ErrUnreachable, h.lastErr)
	case h.sending:
		reason = fmt.Errorf("%w: renewal not answered in time", ErrUnreachable)
	default:
		reason = ErrExpired
	}
	h.endLocked(lost(reason))
}

// extended records a successful extend of d sent at sent.
func (h *hold) extended(sent time.Time, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = nil
	if h.err != nil || h.timer == nil {
		return
	}
	h.expires = sent.Add(d)
	h.timer.Reset(time.Until(h.expires))
}

func lost(reason error) error { return fmt.Errorf("%w: %w", ErrLost, reason) }

// renewal tuning
const (
	// minRetry and maxRetry bound the pause between failed renewals.
	minRetry = 10 * time.Millisecond
	maxRetry = time.Second
)

// renew is the renewal goroutine: every two thirds of the expire it
// extends the key to the full expire (less near the max-hold cap), with a
// timeout of its own, never the caller's context. It exits when stopped,
// when the hold ends, or at the max-hold cap.
func (h *hold) renew(sent time.Time, stop <-chan struct{}) {
	defer close(h.renewDone)
	retry := min(max(h.expire/10, minRetry), maxRetry)
	timer := time.NewTimer(time.Until(sent.Add(h.expire * 2 / 3)))
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-h.done:
			return
		case <-timer.C:
		}

		d, last := h.expire, false
		if !h.maxEnd.IsZero() {
			if rest := time.Until(h.maxEnd); rest < d {
				// The last renewal: the key dies at the max-hold cap.
				d, last = rest, true
			}
			if d < time.Millisecond {
				h.markCapped()
				return // the key and the local deadline run out on their own
			}
		}
		sent := time.Now()
		h.mu.Lock()
		budget := time.Until(h.expires)
		h.sending = true
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), max(budget, minRetry))
		cmd, ackErr := h.ack.run(ctx, h.client, extendScript, h.lockKey, h.id, strconv.FormatInt(d.Milliseconds(), 10))
		n, err := cmd.Int64()
		cancel()
		if err == nil && n == 0 && ackErr != nil {
			err = ackErr // extended on the master only: not a renewal we can count on
		}
		h.mu.Lock()
		h.sending = false
		if err != nil {
			h.lastErr = err
		}
		h.mu.Unlock()
		switch {
		case err != nil:
			timer.Reset(retry)
			continue
		case n == 1:
			h.end(lost(ErrExpired))
			return
		case n == 3:
			h.end(lost(ErrTakenOver))
			return
		case n == 2:
			// Someone removed the key's expire (PERSIST): it is ours but no
			// longer behaves as this Lock was configured.
			h.end(lost(ErrNotExpirable))
			return
		}
		h.extended(sent, d)
		if last {
			h.markCapped()
			return
		}
		timer.Reset(time.Until(sent.Add(d * 2 / 3)))
	}
}

// markCapped records that renewal stopped at the max-hold cap, which is
// then the reason of the loss at the local deadline.
func (h *hold) markCapped() {
	h.mu.Lock()
	h.capped = true
	h.mu.Unlock()
}

// Done returns a channel that is closed when this Lock does not hold the
// lock: it is open from a successful Acquire until the hold ends, by
// Release or by loss. It follows the context.Context contract: every call
// during one hold returns the same channel, which is closed once. Before
// the first acquire it returns a closed channel. A new Acquire starts a new
// hold with a new channel.
//
// The hold is lost, and the channel closed, when auto-renewal finds the key
// gone or someone else's, when no renewal succeeded before the expire ran
// out on the local clock (counted from when the acquire or last renewal was
// sent, so it runs out no later than the key), and, without auto-renewal,
// when the expire runs out on the local clock. A lock without expire and
// without auto-renewal is only ended by Release.
func (l *Lock) Done() <-chan struct{} {
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
func (l *Lock) Err() error {
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
