package redislock

import (
	"context"
	"errors"
	"time"
)

// releaseTimeout bounds the Release that Do runs after fn, on a context
// that keeps the caller's values but not its cancellation.
const releaseTimeout = 5 * time.Second

// Do acquires the lock (waiting as Acquire does), runs fn while holding it,
// and releases it, even if fn panics.
//
// fn's context is derived from ctx and is also cancelled the moment the
// lock is lost (renewal failed, the key expired or was taken or reset);
// context.Cause then returns an error matching ErrLost and the reason. fn
// should stop its work when that happens: someone else may hold the lock.
//
// Do returns Acquire's error if the lock was not acquired (fn did not run),
// and otherwise fn's error joined with Release's: after a loss that is
// ErrNotAcquired. Use errors.Is to tell them apart.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := l.Acquire(ctx); err != nil {
		return err
	}
	return l.runHeld(ctx, fn)
}

// TryDo is Do without waiting: when another owner holds the lock it returns
// ErrLocked at once and fn does not run. It suits jobs that any one worker
// may do, where the others skip their turn.
func (l *Lock) TryDo(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := l.TryAcquire(ctx); err != nil {
		return err
	}
	return l.runHeld(ctx, fn)
}

// runHeld runs fn under the hold just acquired, with a context cancelled on
// loss, and releases the lock afterwards.
func (l *Lock) runHeld(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	fctx, cancel := context.WithCancelCause(ctx)
	done := l.Done()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-done:
			cancel(l.Err())
		case <-fctx.Done():
		}
	}()
	defer func() {
		cancel(context.Canceled)
		<-watchDone
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer rcancel()
		err = errors.Join(err, l.Release(rctx))
	}()
	return fn(fctx)
}
