package hold

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"time"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// StartRenewal starts the renewal goroutine for a hold acquired at sent.
// It returns ErrAlreadyStarted, starting nothing, when the hold already
// has one.
func (h *Hold) StartRenewal(sent time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.renewDone != nil {
		return ErrAlreadyStarted
	}
	h.stop, h.renewDone = make(chan struct{}), make(chan struct{})
	h.stopCtx, h.cancelCall = context.WithCancel(context.Background())
	if h.ev != nil {
		h.ev.RenewalStart(h, renewAfter(h.expire, h.margin))
	}
	go h.renew(sent, h.stop)
	return nil
}

// Retire stops the hold's renewal, drops the GC cleanup that would
// otherwise stop it (the primitive is done with this hold), and waits for the
// goroutine to exit, but no longer than ctx allows.
//
// Waiting is not needed for safety: once stopped, the goroutine acts on no
// reply it gets, and an extend still in flight can only add time to a key
// that holds this Lock's id, never recreate one. It only bounds how long a
// renewal stuck on a dead connection outlives its hold.
func (h *Hold) Retire(ctx context.Context) {
	h.SignalStop()
	h.cleanup.Stop()
	if done := h.RenewalDone(); done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
}

// stopRenewal stops the renewal goroutine, if any, and waits for it to
// exit. Safe to call more than once and from several goroutines.
func (h *Hold) stopRenewal() {
	h.SignalStop()
	if done := h.RenewalDone(); done != nil {
		<-done
	}
}

// SignalStop tells the renewal goroutine, if any, to stop, and cancels the
// renewal it may have in flight. It does not wait. Safe to call more than
// once and from several goroutines.
func (h *Hold) SignalStop() {
	h.mu.Lock()
	stop, cancel := h.stop, h.cancelCall
	h.mu.Unlock()
	if stop != nil {
		h.stopOnce.Do(func() {
			close(stop)
			cancel()
		})
	}
}

// RenewalDone returns the channel closed when the renewal goroutine has
// exited; nil without one.
func (h *Hold) RenewalDone() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewDone
}

// stopped reports whether the renewal was told to stop.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// ErrAbandoned ends a hold whose primitive was collected while holding.
var ErrAbandoned = errors.New("redislock: Lock dropped while holding (collected without Release); its key expires on its own")

// Abandon is the cleanup of a primitive collected while holding: it stops
// the renewal without waiting (cleanups must not block), the local timer
// and the watch, and ends the hold. The key expires on its own.
func Abandon(h *Hold) {
	h.SignalStop()
	h.End(LostErr(ErrAbandoned)) // stops the timer and the watch, and tells the observers
}

// SetCleanup records the cleanup that abandons h when its primitive is
// collected (runtime.AddCleanup(primitive, Abandon, h)); Retire stops it.
func (h *Hold) SetCleanup(c runtime.Cleanup) { h.cleanup = c }

// renewal tuning
const (
	// minRetry and maxRetry bound the pause between failed renewals.
	minRetry = 10 * time.Millisecond
	maxRetry = time.Second
)

// renew is the renewal goroutine: every two thirds of the expire (less
// the safety margin) it
// extends the key to the full expire (less near the max-hold cap), with a
// timeout of its own, never the caller's context. It exits when stopped,
// when the hold ends, or at the max-hold cap.
func (h *Hold) renew(sent time.Time, stop <-chan struct{}) {
	defer close(h.renewDone)
	if h.ev != nil {
		defer h.ev.RenewalExit(h)
	}
	retry := min(max(h.expire/10, minRetry), maxRetry)
	timer := time.NewTimer(time.Until(sent.Add(renewAfter(h.expire, h.margin))))
	defer timer.Stop()
	for h.awaitRenewal(timer.C, stop) {
		next, goOn := h.renewOnce(stop, retry)
		if !goOn {
			return
		}
		timer.Reset(next)
	}
}

// awaitRenewal waits for the renewal's time (tick), then for an Extend in
// flight, whose reply must be applied first: it takes h.extending, which
// renewOnce gives back. It returns false when stop or the end of h comes
// first.
func (h *Hold) awaitRenewal(tick <-chan time.Time, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	case <-h.done:
		return false
	case <-tick:
	}
	select {
	case h.extending <- struct{}{}:
		return true
	case <-stop:
		return false
	case <-h.done:
		return false
	}
}

// renewOnce sends one renewal, h.extending held (and given back before it
// returns), and returns how long until the next one, or false when
// renewal ends: stopped, the hold lost, or the max-hold cap reached.
func (h *Hold) renewOnce(stop <-chan struct{}, retry time.Duration) (time.Duration, bool) {
	d, last, capped := h.renewalLength()
	if capped {
		<-h.extending
		h.markCapped()
		return 0, false // the key and the local deadline run out on their own
	}
	sent := time.Now()
	n, err := h.sendRenewal(sent, d, stop)
	if stopped(stop) {
		// Release or a new Acquire stopped us while the call was in
		// flight: its outcome is theirs to judge, not ours.
		<-h.extending
		return 0, false
	}
	h.mu.Lock()
	h.sending = false
	if err != nil {
		h.lastErr = err
	}
	h.mu.Unlock()
	if err == nil && n == 0 {
		h.extended(sent, d)
	}
	<-h.extending
	switch {
	case err != nil:
		return retry, true
	case n == 1:
		h.End(LostErr(ErrExpired))
		return 0, false
	case n == 3:
		h.End(LostErr(ErrTakenOver))
		return 0, false
	case n == 2:
		// Someone removed the key's expire (PERSIST): it is ours but no
		// longer behaves as this Lock was configured.
		h.End(LostErr(ErrNotExpirable))
		return 0, false
	}
	if last {
		h.markCapped()
		return 0, false
	}
	return time.Until(sent.Add(renewAfter(d, h.margin))), true
}

// renewalLength returns how long the next renewal extends the key by:
// the expire, or less when the max-hold cap comes sooner (last: the key
// then dies at the cap), never less than what Extend set. capped reports
// that the cap has come: no renewal is left.
func (h *Hold) renewalLength() (d time.Duration, last, capped bool) {
	d = h.expire
	if !h.maxEnd.IsZero() {
		if rest := time.Until(h.maxEnd); rest < d {
			// The last renewal: the key dies at the max-hold cap.
			d, last = rest, true
		}
		if d < time.Millisecond && h.extendedUntil() < time.Millisecond {
			return 0, false, true
		}
	}
	if rest := h.extendedUntil(); rest > d {
		d = rest // never shorten what Extend set
	}
	return d.Truncate(time.Millisecond), last, false // what Redis counts
}

// sendRenewal extends the key by d, within what is left of the hold's
// validity, and returns the extend script's reply, or why it failed: an
// extend that the replicas did not acknowledge (WithReplicaAck) is no
// renewal to count on.
func (h *Hold) sendRenewal(sent time.Time, d time.Duration, stop <-chan struct{}) (int64, error) {
	h.mu.Lock()
	budget := time.Until(h.lossAt())
	h.sending = true
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(h.stopCtx, max(budget, minRetry))
	defer cancel()
	if h.ev != nil {
		ctx = h.ev.ExtendStart(ctx, h, d)
	}
	h.ExpectBegin()
	cmd, ackErr := h.ack.Run(ctx, h.client, h.extend, h.lockKey, h.id, strconv.FormatInt(d.Milliseconds(), 10))
	n, err := cmd.Int64()
	topology.NoteConnError(ctx, h.client, err) // a failover: find the new master
	if h.ev != nil {
		eerr := err
		if err == nil && n == 0 && ackErr != nil {
			eerr = ackErr
		}
		// A renewal stopped by Release is not retried.
		h.ev.ExtendEnd(ctx, h, d, n, eerr, time.Until(sent.Add(budget)), !stopped(stop))
	}
	h.ExpectEnd(err == nil && n == 0)
	if err == nil && n == 0 && ackErr != nil {
		err = ackErr // extended on the master only: not a renewal we can count on
	}
	return n, err
}

// renewAfter is how long after an extend of d was sent the next renewal
// is due: two thirds of what the safety margin leaves of d.
func renewAfter(d, margin time.Duration) time.Duration {
	return max(d-margin, 0) * 2 / 3
}

// markCapped records that renewal stopped at the max-hold cap, which is
// then the reason of the loss at the local deadline.
func (h *Hold) markCapped() {
	h.mu.Lock()
	h.capped = true
	h.mu.Unlock()
}
