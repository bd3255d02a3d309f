package redislock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Token returns the fencing token of this Lock's current hold, or of its
// last one after it ended: a number larger than that of every earlier
// grant of the lock. It is 0 without WithFencing and before the first
// acquire.
//
// Send it with every write to the resource the lock protects, and have the
// resource refuse writes whose token is lower than the highest it has
// accepted (an SQL "UPDATE ... WHERE fence <= $token", a compare in a
// script). Then a holder that was paused past its expire, and lost the lock
// without noticing, cannot overwrite what the next holder wrote.
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

// Guard runs the Redis commands that fn queues on pipe as one MULTI/EXEC
// transaction, only if the lock key holds this Lock's id when the
// transaction executes: it WATCHes the lock key, checks the owner, and
// lets EXEC abort if the key changed or expired meanwhile. It works from
// any Lock with the same name and id.
//
// An aborted EXEC is not by itself a loss: this Lock's own renewal, or an
// Extend, also touches the key. Guard then reads the key again and, while
// it still holds our id, retries the whole transaction (calling fn again;
// up to 10 times). So fn must only queue commands, and the commands to
// read results from are those of its last call.
//
// It returns ErrNotAcquired, with none of fn's commands run, when the lock
// is not ours, fn's error if fn fails (nothing is run then either), an
// error matching redis.TxFailedErr if the key changed under every attempt
// while staying ours, or the transaction's first command error (the other
// commands still ran: Redis does not roll back). On a cluster, every key fn
// touches must be in the lock key's slot.
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
