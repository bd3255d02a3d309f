package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/go-redis-lock/redislock/internal/hold"
)

// releaseTimeout bounds the Release that Do runs after fn, and a Release
// called with a context that had already ended (see Lock.Release), on a
// context that keeps the caller's values but not its cancellation.
const releaseTimeout = 5 * time.Second

// Do acquires the lock as Acquire does, runs fn, and releases it, even if
// fn panics; fn's context is also cancelled when the lock is lost (see
// Done), with a cause matching ErrLost and the reason. Do returns Acquire's
// error if the lock was not acquired (fn did not run); else fn's error,
// joined with an error matching ErrLost if the hold was lost before fn
// returned, and with Release's error: nil only if fn returned nil and the
// lock was held until released. The release acts only on the hold this
// call acquired.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return l.do(ctx, fn, true)
}

// TryDo is Do without waiting: when another owner holds the lock it returns
// ErrLocked at once and fn does not run.
func (l *Lock) TryDo(ctx context.Context, fn func(ctx context.Context) error) error {
	return l.do(ctx, fn, false)
}

// do is Do, or TryDo if not wait, of a primitive held as a Lock.
func (l *core) do(ctx context.Context, fn func(ctx context.Context) error, wait bool) error {
	if fn == nil {
		return l.wrap(errNilFunc)
	}
	h, err := l.runQueued(ctx, wait)
	if err != nil {
		return err
	}
	defer l.giveTurn(h)
	return l.runHeld(ctx, h, fn)
}

// runHeld runs fn under hold h, just acquired, with a context cancelled on
// its loss, and releases h afterwards.
func (l *core) runHeld(ctx context.Context, h *hold.Hold, fn func(ctx context.Context) error) (err error) {
	fctx, cancel := context.WithCancelCause(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-h.Done():
			cancel(l.wrap(h.Err()))
		case <-fctx.Done():
		}
	}()
	defer func() {
		cancel(context.Canceled)
		<-watchDone
		// A loss while fn ran is reported even when fn did not look.
		if lossErr := h.Err(); errors.Is(lossErr, ErrLost) && !errors.Is(err, ErrLost) {
			err = joinErrs(err, l.wrap(lossErr))
		}
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer rcancel()
		rerr := l.release(rctx, h)
		if errors.Is(rerr, ErrNotAcquired) && errors.Is(err, ErrLost) {
			rerr = nil // h was lost: the loss says why it is not held
		}
		err = joinErrs(err, rerr)
	}()
	return fn(fctx)
}

// current returns this Lock's current (or last) hold.
func (l *core) current() *hold.Hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hold
}
