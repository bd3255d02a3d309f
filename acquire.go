package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// acquire tries to take the lock and, when blocking, waits for it. It
// returns when the winning try was sent and the fencing token it got, or
// why there was none.
func (l *core) acquire(ctx context.Context, blocking bool) (time.Time, acquireResult, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, acquireResult{}, l.wrap(fmt.Errorf("%w: %w", ErrLocked, err))
	}
	a := &attempt{l: l, blocking: blocking}
	if blocking && l.proto.queueRegisters {
		a.t = joinQueue(l.client, l.keys[0]) // first: the try registers the queue's token
	}
	a.try(ctx)
	defer a.leave()
	for {
		if done, err := a.result(); done {
			if err != nil {
				return a.sent, acquireResult{}, a.fail(ctx, err)
			}
			return a.sent, a.res, nil
		}
		a.registered = true
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
	t          *ticket       // our place in the local queue, once we wait
	queued     bool          // we waited for our turn in the queue
	sent       time.Time     // when the last try was sent
	res        acquireResult // its result
	terr       error         // its error
	popped     bool          // the last BLPOP took a wake-up signal
	registered bool          // a busy try registered us as waiting (protocol.leave)
	pause      time.Duration // between waits while the slot migrates
}

// try sends a try that was not woken.
func (a *attempt) try(ctx context.Context) {
	a.sent = time.Now()
	a.res, a.terr = a.l.try(ctx, a.blocking, a.t.queue())
	a.popped = false
}

// result reports whether the last try ends the attempt, and with what
// error (nil: acquired). errRedisFailed stands for the try's own error,
// which fail turns into Acquire's.
func (a *attempt) result() (done bool, err error) {
	switch {
	case a.terr != nil:
		return true, errTryFailed
	case a.res.status == statusAcquired:
		return true, nil
	case a.res.status == statusOurs:
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
		return a.l.fail(ctx, a.terr, a.popped)
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
	if l.proto.readsKey {
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
		a.t = joinQueue(a.l.client, a.l.keys[0])
	}
	select {
	case <-a.t.turn:
	case <-ctx.Done():
	}
	if hint := a.t.pttlHint(); hint > 0 {
		a.res.pttl = hint
	}
	if a.l.proto.shared && a.t.afterAcquire() && ctx.Err() == nil {
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
	wsent := time.Now()
	w := l.waitAndTry(ctx, l.slice(ctx, a.res.pttl), a.t.q)
	if w.err != nil && ctx.Err() != nil && errors.Is(w.err, ctx.Err()) {
		// Given up while waiting: abandonWait settles the attempt. res,
		// from the try before, is what the next waiter learns.
		return l.wrap(fmt.Errorf("%w: %w", ErrLocked, w.err))
	}
	if l.ev != nil {
		switch {
		case w.popped:
			l.ev.wakeup(ctx, l.info(l.ownerID()), WakeSignal, time.Since(wsent))
		case w.slept:
			l.ev.wakeup(ctx, l.info(l.ownerID()), WakeTimeout, time.Since(wsent))
		}
	}
	a.sent, a.res, a.popped, a.terr = wsent, w.res, w.popped, w.err
	if !w.moving || a.terr != nil || a.res.status != statusBusy {
		a.pause = 0
		return nil
	}
	// The slot is migrating: the BLPOP was redirected instead of blocking.
	// Pause (the try came back busy) before waiting again, so as not to
	// spin until the migration ends.
	a.pause = topology.Backoff(a.pause)
	if !topology.Sleep(ctx, a.pause) {
		return l.wrap(fmt.Errorf("%w: %w", ErrLocked, ctx.Err()))
	}
	return nil
}

// leave takes the attempt out of the local queue, telling the next waiter
// what it learnt of the holder, and takes back its registration in Redis
// where the primitive has one (see protocol.registers).
func (a *attempt) leave() {
	l := a.l
	acquired := a.terr == nil && a.res.status == statusAcquired
	emptied := false
	if a.t != nil {
		emptied = a.t.leave(l.expiresHint(a.res, a.terr, a.sent), acquired)
	}
	switch {
	case l.proto.leave == nil:
	case l.proto.queueRegisters:
		// The queue's registration, and the admission it may have been
		// given, once nobody waits in it: whoever leaves last, even one
		// that came in at its first try and registered nothing itself.
		if emptied && a.t.q.tokenSent() {
			l.leave(a.t.q)
		}
	case a.registered && !acquired:
		// Stop waiting in Redis, where others wait behind us. (A try
		// whose reply did not come may have registered us too: the
		// giveback that follows it takes that back.)
		l.leave(nil)
	}
}
