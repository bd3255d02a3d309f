package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/hold"
	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// Release ends this Lock's hold: it deletes the lock key if it holds this
// Lock's id, wakes one waiter, stops the renewal, closes Done (Err then
// returns ErrReleased) and lets the next Acquire go ahead. It works from any
// Lock with the same name and id, and from an ended ctx, under a grace of
// 5 s. It returns ErrNotAcquired, changing nothing, when the key is missing
// or holds another id (Err then says why), or when this Lock holds nothing
// while another goroutine acquires through it; a Redis error, wrapped,
// after which the key may hold this Lock's id until it expires. A release
// whose reply was lost and that go-redis retried counts as done while the
// hold was valid (on *redis.Client and *redis.ClusterClient).
func (l *Lock) Release(ctx context.Context) error {
	err, _ := l.releaseTurn(ctx, false)
	return err
}

// releaseTurn is Release. With keep, a release that failed (not sent, or
// no answer, or an error reply: the key may still hold our id) keeps the
// Lock's turn and returns what gives it back, for a caller that retries
// the release under it (Locker's Unlock): no Acquire of this Lock may
// start before the key is freed.
func (l *core) releaseTurn(ctx context.Context, keep bool) (error, func()) {
	if err := l.usable(); err != nil {
		return err, nil
	}
	select {
	case l.turn <- struct{}{}:
		// Nothing is held or being acquired through this Lock: a release
		// by id. It keeps the turn until its reply is in, so that an
		// Acquire of this Lock meanwhile waits (TryAcquire: ErrLocked)
		// rather than take a key this release may delete.
		defer func() { <-l.turn }()
		return l.release(ctx, nil), nil
	default:
	}
	// The turn is taken: by the hold, which this Release ends, or by an
	// Acquire under way in another goroutine (ErrNotAcquired, nothing
	// sent).
	h, _, err := l.beginRelease(nil, true)
	if err != nil {
		return err, nil
	}
	err = l.finishRelease(ctx, h, stateHeld)
	if keep && err != nil && !errors.Is(err, ErrNotAcquired) {
		return err, func() { l.giveTurn(h) }
	}
	l.giveTurn(h)
	return err, nil
}

// giveTurn gives back the Lock's turn that hold h has, if it still has it
// (a hold's turn is given back once, by whichever of its releases comes
// first).
func (l *core) giveTurn(h *hold.Hold) {
	l.mu.Lock()
	mine := h != nil && l.turnHold == h
	if mine {
		l.turnHold = nil
	}
	l.mu.Unlock()
	if mine {
		<-l.turn // the next goroutine's Acquire may go ahead
	}
}

// release is Release of the hold want, or of whatever this Lock holds when
// want is nil. For a want that is no longer this Lock's current hold (it
// was lost and the Lock acquired again), or is being released, it sends
// nothing and returns ErrNotAcquired.
func (l *core) release(ctx context.Context, want *hold.Hold) error {
	h, before, err := l.beginRelease(want, false)
	if err != nil {
		return err
	}
	return l.finishRelease(ctx, h, before)
}

// finishRelease is release once beginRelease has moved l to releasing the
// hold h (nil: a release by id), from the state before.
func (l *core) finishRelease(ctx context.Context, h *hold.Hold, before lockState) (result error) {
	ctx, cancel := graceIfEnded(ctx)
	defer cancel()
	outcome := OutcomeError
	if l.ev != nil {
		in := l.info(l.releaseID(h))
		ctx = l.observeStart(before, func() context.Context { return l.ev.releaseStart(ctx, in) })
		if h != nil && h.RenewalDone() != nil {
			l.ev.renewalShutdown(in)
		}
		defer func() {
			var held time.Duration
			if h != nil {
				held = time.Since(h.Start())
			}
			l.ev.releaseEnd(ctx, in, held, outcome, result)
		}()
	}
	defer func() {
		if h != nil {
			h.Retire(ctx)
		}
		l.mu.Lock()
		l.state = stateIdle
		l.mu.Unlock()
	}()
	if err := l.cleanups.Wait(ctx); err != nil {
		if h != nil {
			h.End(hold.LostErr(fmt.Errorf("%w: the release was not sent: %w", ErrUnreachable, err)))
		}
		return l.wrap(fmt.Errorf("release: %w: an earlier attempt's cleanup had no answer yet: %w", ErrUnreachable, err))
	}
	if h != nil {
		// Stop renewing and watching before the release is sent: a
		// renewal that answers after it, or the invalidation of our own
		// DEL, must not be read as a loss. A renewal still in flight is
		// harmless: an extend never recreates a key.
		h.SignalStop()
		h.Unwatch()
	}

	vouched := h != nil && h.Valid()
	id := l.releaseID(h)
	n, retried, unanswered, err := l.sendRelease(ctx, id)
	n = l.noteHandOff(n, err)
	l.afterRelease(id, unanswered, err)
	if !countsRetries(l.client) {
		retried = false // unknown client: a retry cannot be told from an extra encoding
	}
	err, reason := judgeRelease(n, retried && vouched, err)
	outcome = releaseOutcome(err, reason)
	if h != nil {
		h.EndReleased(reason, err)
	}
	if err != nil {
		return l.wrap(err)
	}
	return nil
}

// graceIfEnded returns ctx, or, when ctx has already ended, a context of
// releaseTimeout that keeps its values (see Release).
func graceIfEnded(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
}

// beginRelease moves l to releasing, from held (the hold want, or any
// when want is nil) or, with want nil and not mustHold, from idle: until
// the reply is in, an Acquire on this Lock would take a key under the id
// this release may delete. It returns the hold released (nil from idle)
// and the state before, or ErrNotAcquired while another goroutine
// acquires or releases, or when want is over.
func (l *core) beginRelease(want *hold.Hold, mustHold bool) (*hold.Hold, lockState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var h *hold.Hold
	switch {
	case l.state == stateHeld && (want == nil || l.hold == want):
		h = l.hold
	case l.state != stateIdle || want != nil || mustHold:
		return nil, l.state, l.wrap(ErrNotAcquired)
	}
	before := l.state
	l.state = stateReleasing
	return h, before, nil
}

// judgeRelease reads the release script's reply n (or its error): the
// error Release returns and, when the hold turns out lost, why. ownRetry
// reports that go-redis sent the release again after a lost reply, for a
// hold still valid: our own first attempt ran.
func judgeRelease(n int64, ownRetry bool, err error) (error, error) {
	switch {
	case err != nil && topology.IsReply(err):
		// An error reply: the script did not run, and the key still holds
		// our id until it expires or a later Release gets through.
		return fmt.Errorf("release: %w", err), fmt.Errorf("%w: the release was refused: %w", ErrUnreachable, err)
	case err != nil:
		// No answer: the release may or may not have run.
		return fmt.Errorf("release: %w: %w", ErrUnreachable, err), nil
	case n != releaseDone && ownRetry:
		// Our own release ran, and its reply was lost: go-redis's retry
		// found the key gone, or already taken by the waiter it woke.
		return nil, nil
	case n == releaseMissing:
		return ErrNotAcquired, ErrExpired
	case n != releaseDone:
		return ErrNotAcquired, ErrTakenOver
	}
	return nil, nil
}

// releaseOutcome is the Outcome a release reports to the Observer.
func releaseOutcome(err, reason error) Outcome {
	switch {
	case err == nil:
		return OutcomeReleased
	case errors.Is(err, ErrNotAcquired) && errors.Is(reason, ErrExpired):
		return OutcomeExpired
	case errors.Is(err, ErrNotAcquired):
		return OutcomeTakenOver
	}
	return OutcomeError
}

// releaseID is the id a release of h sends: the hold's own; else one
// whose release got no reply before (this Lock has a fresh id since); else
// this Lock's.
func (l *core) releaseID(h *hold.Hold) string {
	if h != nil {
		return h.ID()
	}
	if p := l.unreleasedID(); p != "" {
		return p
	}
	return l.ownerID()
}

// sendRelease runs the release script. retried reports whether go-redis
// sent the command that answered more than once (a retry after a lost
// reply: an earlier attempt may have run); unanswered whether any attempt,
// of the EVALSHA or of the EVAL after a NOSCRIPT, went without a reply and
// may yet run.
//
// A topology reply (TRYAGAIN for the whole time the lock's slot migrates:
// the script touches two keys) is retried within ctx (see topology.Do).
func (l *core) sendRelease(ctx context.Context, own string) (n int64, retried, unanswered bool, err error) {
	var r topology.Retry
	for {
		sha := &countedArg{s: own}
		if l.releaseCmd != nil { // built once: a copy with the id is all a send allocates
			cmd := slices.Clone(l.releaseCmd)
			cmd[releaseIDArg] = sha
			n, err = l.client.Do(ctx, cmd...).Int64()
		} else {
			n, err = l.client.Do(ctx, wire.EvalShaCmd(l.scripts.release, l.keys, []any{sha, l.signalExpireMS, l.turnMS})...).Int64()
		}
		final := sha
		if wire.IsNoScript(err) {
			// Not cached: EVAL caches it. The EVALSHA ran nothing.
			final = &countedArg{s: own}
			n, err = l.scripts.release.Eval(ctx, l.client, l.keys, final, l.signalExpireMS, l.turnMS).Int64()
		}
		retried = final.sends.Load() > 1
		unanswered = unanswered || retried || sha.sends.Load() > 1
		if !r.Again(ctx, l.client, err) {
			return n, retried, unanswered, err
		}
	}
}

// noteHandOff reads the release script's reply n: a hand-off under
// contention (releaseHandedOff) has the next blocking Acquire of a Lock
// with its own random id wait first, for the rest of the turn (see
// core.handedOff); it is a release like any other (releaseDone).
func (l *core) noteHandOff(n int64, err error) int64 {
	if err != nil || n != releaseHandedOff {
		return n
	}
	if l.autoID {
		l.handedOff.Store(time.Now().Add(l.turnLen).UnixNano())
	}
	return releaseDone
}

// afterRelease records the outcome of a release of id: when an attempt of
// it got no reply, it may still reach Redis much later and delete whatever
// key holds id then, so a Lock with its own random id takes a fresh one,
// out of its reach; and when the release as a whole got no reply, or was
// refused (an error reply), the key may still hold id, which the next
// Release then sends, while the next Acquire takes a fresh id.
func (l *core) afterRelease(id string, unanswered bool, err error) {
	if !l.autoID {
		return
	}
	if unanswered || err != nil {
		l.renewID()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil: // no reply, or refused (the key may hold id still)
		l.unreleased = id
	case l.unreleased == id:
		l.unreleased = ""
	}
}

// unreleasedID returns the id of a release that got no reply, if any.
func (l *core) unreleasedID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unreleased
}

// countsRetries reports whether client encodes each command argument once
// per attempt, so that countedArg counts retries. Other implementations
// of redis.UniversalClient (go-redis's AutoPipeliner, wrappers) may encode
// an argument more than once without retrying.
func countsRetries(client redis.UniversalClient) bool {
	switch client.(type) {
	case *redis.Client, *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

// renewID gives a Lock with its own random id a fresh one (see ID).
func (l *core) renewID() {
	l.ident.Store(l.newIdentity(newOwnerID()))
}

// countedArg is a command argument that counts how often go-redis writes
// it to a connection (go-redis encodes an encoding.BinaryMarshaler on every
// write): more than once means the command was retried.
type countedArg struct {
	s     string
	sends atomic.Int32
}

func (a *countedArg) MarshalBinary() ([]byte, error) {
	a.sends.Add(1)
	return []byte(a.s), nil
}

// Replies of the release script.
const (
	releaseDone      = 0 // deleted our key and pushed the signal
	releaseHandedOff = 3 // the same, onto an empty list: a waiter took the last signal
	releaseMissing   = 1 // no key
	releaseOther     = 2 // the key holds another id
)
