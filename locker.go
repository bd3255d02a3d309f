package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Locker returns a sync.Locker on l. Its Lock blocks until the lock is
// held, with no deadline, retrying Redis errors with backoff (10 ms
// doubling to 1 s). Its Unlock releases it, retrying Redis errors until the
// hold's expire runs out; it panics, recoverably, when the lock is no
// longer held (lost, reset, expired, or never locked) or the release keeps
// failing, and counts a release whose reply was lost as done. Both take
// turns with l's other users as Acquire and Release do. A sync.Locker
// cannot report a loss: prefer Do, or watch l.Done().
func (l *Lock) Locker() sync.Locker {
	// Acquire takes the Lock's turn itself; Unlock's first release keeps
	// it while the release has to be retried.
	first := func(ctx context.Context) (error, func()) { return l.releaseTurn(ctx, true) }
	return locker{c: &l.core, acquire: l.Acquire, release: l.Release, firstRelease: first, err: l.Err}
}

// locker is a sync.Locker on a primitive's hold: c's turn is its local
// mutex, and acquire, release and err are the primitive's. firstRelease,
// when set (a Lock), is the first release of Unlock, which may keep the
// turn for the retries and returns what gives it back.
type locker struct {
	c                *core
	acquire, release func(ctx context.Context) error
	firstRelease     func(ctx context.Context) (error, func())
	err              func() error
}

// Backoff between failed attempts of Lock and Unlock.
const (
	lockerMinBackoff = 10 * time.Millisecond
	lockerMaxBackoff = time.Second
	// unlockPatience bounds Unlock's retries for a lock without expire.
	unlockPatience = 30 * time.Second
)

func (m locker) Lock() {
	if !m.c.queued {
		m.c.turn <- struct{}{}
	}
	backoff := lockerMinBackoff
	for {
		err := m.acquire(context.Background())
		if err == nil {
			return
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, lockerMaxBackoff)
	}
}

func (m locker) Unlock() {
	if len(m.c.turn) == 0 {
		panic(fmt.Sprintf("redislock: Unlock of unlocked %s %q", m.c.proto.kind(), m.c.name))
	}
	// The next local Lock may start only once the release is over, or its
	// acquire would race with it.
	release := m.release
	if m.firstRelease == nil {
		defer func() { <-m.c.turn }()
	} else {
		// A Lock's turn: its first release keeps it when a retry is
		// needed, and the retries release by id under it.
		var giveBack func()
		defer func() {
			if giveBack != nil {
				giveBack()
			}
		}()
		first := true
		release = func(ctx context.Context) error {
			if !first {
				return m.c.release(ctx, nil)
			}
			first = false
			var err error
			err, giveBack = m.firstRelease(ctx)
			return err
		}
	}
	giveUp := time.Now().Add(unlockPatience)
	if m.c.expire > 0 {
		giveUp = time.Now().Add(m.c.expire)
	}
	backoff := lockerMinBackoff
	for attempt := 0; ; attempt++ {
		err := release(context.Background())
		switch {
		case err == nil:
			return
		case errors.Is(err, ErrNotAcquired) && attempt == 0:
			panic(fmt.Sprintf("redislock: Unlock of %s %q that is no longer held: %v", m.c.proto.kind(), m.c.name, m.err()))
		case errors.Is(err, ErrNotAcquired):
			return // an earlier attempt whose reply was lost released it
		case time.Now().After(giveUp):
			panic(fmt.Sprintf("redislock: Unlock of %s %q failed: %v", m.c.proto.kind(), m.c.name, err))
		}
		// The key may still be ours until it expires: try again.
		time.Sleep(backoff)
		backoff = min(backoff*2, lockerMaxBackoff)
	}
}
