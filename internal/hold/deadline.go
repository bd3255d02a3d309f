package hold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// expireLocally runs shortly before the local validity deadline (at
// checkAt) and again at it: unless a renewal or an Extend moved it
// meanwhile, the hold is lost at the deadline, after the key was read once
// before it (see verify).
func (h *Hold) expireLocally() {
	h.mu.Lock()
	if h.err != nil {
		h.mu.Unlock()
		return
	}
	if now := time.Now(); now.Before(h.checkAt()) {
		h.timer.Reset(h.checkAt().Sub(now)) // moved meanwhile
		h.mu.Unlock()
		return
	}
	loss := h.lossAt()
	check := h.checkAt().Before(loss) && !h.capped && h.lastErr == nil && !h.sending && !h.checked.Equal(h.expires)
	if check {
		h.checked = h.expires // one read per deadline
	}
	h.mu.Unlock()
	var reason error
	if check {
		var goOn bool
		if goOn, reason = h.verify(loss); goOn {
			return
		}
	}
	h.mu.Lock()
	if now := time.Now(); reason == nil && h.err == nil && now.Before(h.lossAt()) {
		h.timer.Reset(h.lossAt().Sub(now)) // the deadline itself
		h.mu.Unlock()
		return
	}
	if h.expireLocallyLocked(reason) {
		err := h.err
		h.mu.Unlock()
		h.Unwatch()
		h.notifyEnd(err)
		return
	}
	h.mu.Unlock()
}

// expireLocallyLocked ends the hold as lost, with reason, or the reason
// its state gives when nil, unless it ended already or (without a reason)
// the deadline moved.
func (h *Hold) expireLocallyLocked(reason error) bool {
	if h.err != nil || (reason == nil && time.Now().Before(h.lossAt())) {
		return false
	}
	switch {
	case reason != nil:
	case h.capped:
		reason = ErrMaxHold
	case h.lastErr != nil:
		reason = fmt.Errorf("%w: %w", ErrUnreachable, h.lastErr)
	case h.sending:
		reason = fmt.Errorf("%w: renewal not answered in time", ErrUnreachable)
	default:
		reason = ErrExpired
	}
	return h.endLocked(LostErr(reason))
}

// checkLead is how long before the local deadline the key is read (see
// verify): half the safety margin, at most 50 ms. With no margin there is
// no read, nor for a primitive whose key is not the Lock's (a semaphore's
// holders are read by its renewal only).
func (h *Hold) checkLead() time.Duration {
	if !h.reads {
		return 0
	}
	return min(h.margin/2, 50*time.Millisecond)
}

// checkAt is when the key is read before the local deadline.
func (h *Hold) checkAt() time.Time { return h.lossAt().Add(-h.checkLead()) }

// verify reads the key once, shortly before the local deadline, when no
// renewal has failed: another process that shares the id may have extended
// it (a python-redis-lock extend() under the same id, say). When the key
// still holds our id with more than the safety margin left, the hold goes
// on, its deadline moved to what the key has left, counted from when the
// read was sent. An answer that has not come by the deadline (loss) counts
// for nothing, whatever the client's options (go-redis without
// ContextTimeoutEnabled does not end a read at its context's deadline): the
// hold is then lost at the deadline, as without the read. The read runs
// while no Extend or renewal of the hold is in flight (it takes their
// slot), so that it never raises the deadline past what a later one set;
// with one in flight there is no read. reason is the loss the read showed,
// if any: the key gone, or holding another id.
//
// With an id that other Locks share (WithID), a key that one of them took
// again after this hold's key was gone counts as ours: the id is all the
// key says.
func (h *Hold) verify(loss time.Time) (goOn bool, reason error) {
	select {
	case h.extending <- struct{}{}:
	default:
		return false, nil
	}
	type answer struct {
		sent time.Time
		v    string
		left time.Duration
		err  error
	}
	ch := make(chan answer, 1)
	ctx, cancel := context.WithDeadline(context.Background(), loss)
	go func() {
		defer cancel()
		key, sent := h.lockKey[0], time.Now()
		var (
			get  *redis.StringCmd
			pttl *redis.DurationCmd
		)
		_, err := h.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			get, pttl = p.Get(ctx, key), p.PTTL(ctx, key)
			return nil
		})
		a := answer{sent: sent, err: err}
		if err == nil {
			a.v, a.left = get.Val(), pttl.Val()
		}
		ch <- a
	}()
	timer := time.NewTimer(time.Until(loss))
	defer timer.Stop()
	// The extend slot is given back once the read's answer is applied (or
	// dropped): an Extend that waits for it then sets the deadline after
	// the read did, never before.
	var a answer
	select {
	case a = <-ch:
		defer func() { <-h.extending }()
	case <-timer.C:
		go func() { <-ch; <-h.extending }() // the late answer is dropped
		return false, nil                   // too late: the hold is lost at its deadline
	}
	switch {
	case errors.Is(a.err, redis.Nil):
		return false, ErrExpired
	case a.err != nil:
		return false, nil
	case a.v != h.id:
		return false, ErrTakenOver
	case a.left <= 0: // no expire (PERSIST), or gone since the GET
		return false, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	expires := a.sent.Add(a.left)
	if h.err != nil || h.timer == nil || !time.Now().Before(expires.Add(-h.margin)) || !expires.After(h.expires) {
		return false, nil
	}
	h.expires = expires
	h.timer.Reset(time.Until(h.checkAt()))
	return true, nil
}

// Deadline returns the local validity deadline (zero for a key without
// expire), and whether the hold has ended.
func (h *Hold) Deadline() (deadline time.Time, ended bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.expires, h.err != nil
}

// ExtendedBy records a successful Extend of d sent at sent: renewals keep
// the key at least until its end.
func (h *Hold) ExtendedBy(sent time.Time, d time.Duration) {
	h.mu.Lock()
	h.until = sent.Add(d)
	h.mu.Unlock()
	h.extended(sent, d)
}

// extendedUntil returns what is left of the last Extend, or 0.
func (h *Hold) extendedUntil() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.until.IsZero() {
		return 0
	}
	return max(time.Until(h.until), 0)
}

// extended records a successful extend of d sent at sent.
func (h *Hold) extended(sent time.Time, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = nil
	if h.err != nil || h.timer == nil {
		return
	}
	h.expires = sent.Add(d.Truncate(time.Millisecond)) // what Redis counts
	h.timer.Reset(time.Until(h.checkAt()))
}
