package redislock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Token returns the fencing token of this Lock's current hold, or of its
// last one after it ended: a number larger than that of every earlier
// grant of the lock; 0 without WithFencing and before the first acquire.
// Send it with every write to the protected resource, which refuses writes
// whose token is lower than the highest it has accepted: a holder paused
// past its expire then cannot write after the next holder did.
func (l *Lock) Token() int64 { return l.token() }

// token is Token, for every primitive.
func (l *core) token() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hold == nil {
		return 0
	}
	return l.hold.Token()
}

// guardAttempts bounds Guard's transactions when the key keeps changing
// while still holding our id (our own renewals and Extends touch it).
const guardAttempts = 10

// Guard runs the commands fn queues on pipe as one MULTI/EXEC transaction
// if the lock key holds this Lock's id when it executes, from any Lock with
// the same name and id. fn must only queue commands (on a cluster, on keys
// in the lock key's slot): Guard calls it again, up to 10 times, when the
// key changed but still holds the id, and the results are its last call's.
// It returns ErrNotAcquired when the lock is not ours, or fn's error, with
// nothing run; an error matching redis.TxFailedErr if the key changed under
// every attempt while staying ours; or the first command error (the other
// commands still ran: Redis does not roll back).
func (l *Lock) Guard(ctx context.Context, fn func(pipe redis.Pipeliner) error) error {
	lockKey, id := l.keys[0], l.ID()
	for attempt := 1; ; attempt++ {
		err := l.client.Watch(ctx, func(tx *redis.Tx) error {
			owner, err := tx.Get(ctx, lockKey).Result()
			switch {
			case errors.Is(err, redis.Nil) || (err == nil && owner != id):
				return ErrNotAcquired
			case err != nil:
				return err
			}
			_, err = tx.TxPipelined(ctx, fn)
			return err
		}, lockKey)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrNotAcquired):
			return l.wrap(ErrNotAcquired)
		case !errors.Is(err, redis.TxFailedErr):
			return l.wrap(fmt.Errorf("guard: %w", err))
		}
		// The key changed between WATCH and EXEC: still ours?
		owner, gerr := l.client.Get(ctx, lockKey).Result()
		switch {
		case errors.Is(gerr, redis.Nil) || (gerr == nil && owner != id):
			return l.wrap(ErrNotAcquired)
		case gerr != nil:
			return l.wrap(fmt.Errorf("guard: %w", gerr))
		case attempt == guardAttempts:
			return l.wrap(fmt.Errorf("guard: the lock key changed under %d transactions in a row: %w", attempt, err))
		}
	}
}
