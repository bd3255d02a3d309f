package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/wait"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// acquire tries to take the lock and, when blocking, waits for it. It
// returns when the winning try was sent and the fencing token it got, or
// why there was none.
func (l *core) acquire(ctx context.Context, blocking bool) (time.Time, acquireResult, error) {
	a := &attempt{l: l, blocking: blocking} // ctx has not ended yet: see take
	if blocking && l.reg.joinsFirst() {
		a.t = wait.Join(l.client, l.keys[0]) // first: the try registers the queue's token
	}
	if !a.waitFirst() {
		a.try(ctx)
	}
	defer a.leave()
	for {
		if done, err := a.result(); done {
			if err != nil {
				return a.sent, acquireResult{}, a.fail(ctx, err)
			}
			return a.sent, a.res, nil
		}
		a.registered = true
		a.t.Registered()
		a.noteWaiting(ctx)
		if !a.queued && a.takeTurn(ctx) {
			continue
		}
		if err := a.wait(ctx); err != nil {
			return a.sent, acquireResult{}, err
		}
	}
}

// An attempt is one acquire under way: its last try, and where it stands
// in the local queue and in Redis.
type attempt struct {
	l          *core
	blocking   bool
	t          *wait.Ticket  // our place in the local queue, once we wait
	queued     bool          // we waited for our turn in the queue
	sent       time.Time     // when the last try was sent
	res        acquireResult // its result
	terr       error         // its error
	popped     bool          // the last BLPOP took a wake-up signal
	registered bool          // a busy try registered us as waiting (see registration)
	busy       bool          // Redis answered "held" to a try of this attempt
	pause      time.Duration // between waits while the slot migrates
}

// waitFirst reports whether a blocking attempt waits before it tries:
// when this Lock's last release, moments ago, woke a waiter (see
// core.handedOff), whose turn it is. The wait lasts the rest of that turn
// at most, then the attempt goes on as one whose try found the lock busy.
func (a *attempt) waitFirst() bool {
	l := a.l
	if !a.blocking || a.t != nil {
		return false
	}
	until := l.handedOff.Swap(0)
	if until == 0 {
		return false
	}
	now := time.Now()
	left := time.Unix(0, until).Sub(now)
	if left <= 0 {
		return false
	}
	a.sent = now
	a.res = acquireResult{status: wire.Busy, pttl: max(left.Milliseconds(), 1)}
	return true
}

// try sends a try that was not woken.
func (a *attempt) try(ctx context.Context) {
	a.sent = time.Now()
	a.res, a.terr = a.l.try(ctx, a.blocking, a.t)
	a.popped = false
}

// result reports whether the last try ends the attempt, and with what
// error (nil: acquired). errRedisFailed stands for the try's own error,
// which fail turns into Acquire's.
func (a *attempt) result() (done bool, err error) {
	if a.terr == nil && a.res.status == wire.Busy {
		a.busy = true
	}
	switch {
	case a.terr != nil:
		return true, errTryFailed
	case a.res.status == wire.Acquired:
		return true, nil
	case a.res.status == wire.Ours:
		// A signal we popped needs no giveback: the key is held (by our
		// shared id), and its release signals again.
		return true, a.l.wrap(ErrAlreadyAcquired)
	case !a.blocking:
		return true, a.l.wrap(ErrLocked)
	}
	return false, nil
}

// errTryFailed marks, between result and fail, an attempt ended by its
// try's error.
var errTryFailed = errors.New("redislock: the try failed")

// fail returns the error that ends the attempt: the try's, through
// core.fail, or err.
func (a *attempt) fail(ctx context.Context, err error) error {
	if errors.Is(err, errTryFailed) {
		return a.l.fail(ctx, a.terr, a.popped, a.busy)
	}
	return err
}

// noteWaiting logs, at INFO, that the attempt waits, and for whom: one GET,
// only when this is logged, and only before it queues locally.
func (a *attempt) noteWaiting(ctx context.Context) {
	l := a.l
	if a.t != nil || !l.ev.logging(ctx, slog.LevelInfo) {
		return
	}
	var holder string
	if l.proto.readsOwner() {
		holder, _ = l.client.Get(ctx, l.keys[0]).Result()
	}
	l.ev.waiting(ctx, l.info(l.ownerID()), holder, time.Duration(a.res.pttl)*time.Millisecond)
}

// takeTurn waits for the attempt's turn behind this process's other
// waiters (or ctx's end), once. It reports whether it tried again: a
// primitive that several may hold at once tries before it waits when the
// waiter before it acquired, since that says nothing of its own share.
func (a *attempt) takeTurn(ctx context.Context) bool {
	a.queued = true
	if a.t == nil {
		a.t = wait.Join(a.l.client, a.l.keys[0])
	}
	select {
	case <-a.t.Turn():
	case <-a.t.Shut(): // Shutdown: wait sees it
	case <-ctx.Done():
	}
	if hint := a.t.PTTLHint(); hint > 0 {
		a.res.pttl = hint
	}
	if a.l.proto.shared() && a.t.AfterAcquire() && ctx.Err() == nil {
		a.try(ctx)
		return true
	}
	return false
}

// wait sends one wait and the try after it, and returns the error that
// ends the attempt, if any: ctx's end.
func (a *attempt) wait(ctx context.Context) error {
	l := a.l
	if err := ctx.Err(); err != nil {
		return l.wrap(fmt.Errorf("%w: %w", ErrLocked, err))
	}
	if a.t != nil && a.t.IsShut() { // Shutdown ends the waiters queued as well
		return l.wrap(wait.ErrShutdown)
	}
	wsent := time.Now()
	w := l.waitAndTry(ctx, l.slice(ctx, a.res.pttl), a.t)
	if w.err != nil && ctx.Err() != nil && errors.Is(w.err, ctx.Err()) {
		// Given up while waiting: abandonWait settles the attempt. res,
		// from the try before, is what the next waiter learns.
		if errors.Is(w.err, ErrUnreachable) {
			return l.wrap(fmt.Errorf("acquire: %w", w.err))
		}
		return l.wrap(fmt.Errorf("%w: %w", ErrLocked, w.err))
	}
	a.noteWakeup(ctx, w, wsent)
	a.sent, a.res, a.popped, a.terr = wsent, w.res, w.popped, w.err
	busy := a.terr == nil && a.res.status == wire.Busy
	passed := busy && a.popped && l.reg.passOn(ctx, l)
	if !busy || (!w.moving && !passed) {
		a.pause = 0
		return nil
	}
	// The slot is migrating: the BLPOP was redirected instead of blocking.
	// Or the signal it popped was passed on: it may come straight back
	// while the waiter it is for is not in BLPOP yet (or never will be:
	// its process died). Pause before waiting again, so as not to spin.
	a.pause = topology.Backoff(a.pause)
	if !topology.Sleep(ctx, a.pause) {
		return l.wrap(fmt.Errorf("%w: %w", ErrLocked, ctx.Err()))
	}
	return nil
}

// noteWakeup reports how the wait sent at wsent ended, when it popped a
// signal or ran out its slice.
func (a *attempt) noteWakeup(ctx context.Context, w waitResult, wsent time.Time) {
	l := a.l
	if l.ev == nil {
		return
	}
	switch {
	case w.popped:
		l.ev.wakeup(ctx, l.info(l.ownerID()), true, time.Since(wsent))
	case w.slept:
		l.ev.wakeup(ctx, l.info(l.ownerID()), false, time.Since(wsent))
	}
}

// leave takes the attempt out of the local queue, telling the next waiter
// what it learnt of the holder, and takes back its registration in Redis
// where the primitive has one (see registration).
func (a *attempt) leave() {
	l := a.l
	acquired := a.terr == nil && a.res.status == wire.Acquired
	lastOf := ""
	if a.t != nil {
		if !acquired {
			a.t.Registered() // a try whose reply was lost, or that of a wait given up, may have
		}
		lastOf = a.t.Leave(l.expiresHint(a.res, a.terr, a.sent), acquired)
	}
	l.reg.end(l, a, lastOf, acquired)
}

// acquireResult is an acquire script's reply.
type acquireResult struct {
	status wire.Status
	pttl   int64  // busy (or ours): the holder's remaining TTL in ms; -1 when it never expires
	token  int64  // acquired: the fencing token; 0 without fencing
	id     string // the owner id the try was sent with
}

// parseAcquire decodes an acquire script's reply; a semaphore's holders
// of another size are a *sizeMismatchError.
func parseAcquire(cmd *redis.Cmd) (acquireResult, error) {
	status, v, err := wire.ParseAcquire(cmd)
	switch {
	case err != nil:
		return acquireResult{}, err
	case status == wire.OtherSize:
		return acquireResult{}, &sizeMismatchError{stored: v}
	case status == wire.Acquired:
		return acquireResult{status: status, token: v}, nil
	}
	return acquireResult{status: status, pttl: v}, nil
}
