package redislock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-redis-lock/redislock/internal/hold"
)

// Errors about the state of a lock. They mirror python-redis-lock's
// exceptions; compare with errors.Is, never with ==, since every call wraps
// them with the lock's name.
var (
	// ErrLocked says that Redis answered that another owner holds the
	// lock: TryAcquire found it held, or Acquire heard so and its context
	// ended while it waited (the error then also matches the context's
	// error, context.DeadlineExceeded or context.Canceled, under
	// errors.Is), or the caller waited behind another goroutine's hold of
	// the same *Lock until its context ended (TryAcquire: at once). It is
	// never returned when Redis did not answer: that is ErrUnreachable.
	// Python returns False from acquire in both cases.
	ErrLocked = errors.New("redislock: lock is held by another owner")

	// ErrUnreachable says that Redis did not answer. From Acquire and
	// TryAcquire (and the Semaphore's and RWMutex's): a try got no answer
	// (the connection was refused, lost or timed out, or the context
	// ended before any answer; the error then matches the context's error
	// too, and wraps the last Redis error); nothing is retried until the
	// context's end. As the reason of a loss (with ErrLost): no renewal
	// succeeded before the expire ran out, or a Release got no reply or
	// could not be sent (the key may still hold this Lock's id until it
	// expires).
	ErrUnreachable = hold.ErrUnreachable

	// ErrNotAcquired is returned by Release and Extend when the lock key is
	// missing or holds another owner's id: the lock expired, was reset, or
	// was never taken with this id. Nothing in Redis is changed. Python's
	// NotAcquired.
	ErrNotAcquired = errors.New("redislock: lock is not held by this owner")

	// ErrAlreadyAcquired is returned by Acquire and TryAcquire when the key
	// already holds this Lock's caller-given id (WithID): another Lock
	// value, in this process or another, acquired it. Python's
	// AlreadyAcquired. (Goroutines sharing one *Lock take turns instead.)
	ErrAlreadyAcquired = errors.New("redislock: lock is already acquired by this owner")

	// ErrNotReplicated is returned by Acquire, TryAcquire and Extend with
	// WithReplicaAck when fewer replicas than asked acknowledged the write
	// in time. An acquire then releases the key it took and does not hold
	// the lock; an extend leaves the lock held but its new expire
	// unconfirmed. A renewal that meets it counts as failed.
	ErrNotReplicated = errors.New("redislock: too few replicas acknowledged the write")

	// ErrNotExpirable is returned by Extend when the lock key has no expire
	// (it was taken with WithExpire(0), or by another client without one).
	// Python's NotExpirable.
	ErrNotExpirable = hold.ErrNotExpirable

	// ErrSizeMismatch is returned by a Semaphore's Acquire and TryAcquire
	// when the semaphore's current holders use another size than this
	// Semaphore's: nothing is taken. Every process must agree on the size
	// while anyone holds; once the last holder is gone, the next acquire
	// sets it.
	ErrSizeMismatch = errors.New("redislock: semaphore holders use another size")
)

// Errors about how a hold ended, returned by Lock.Err and used as the cause
// of Do's context.
var (
	// ErrLost is returned by Err once this Lock can no longer show that it
	// holds the lock. The error also matches the reason: ErrExpired,
	// ErrTakenOver, ErrUnreachable or ErrMaxHold. Nothing is renewed after
	// a loss and the key is never recreated.
	ErrLost = hold.ErrLost

	// ErrExpired is the reason of a loss when the lock key is gone (it
	// expired, or was deleted by Reset, ResetAll or another client), or
	// when the expire ran out on the local clock of a Lock without
	// auto-renewal.
	ErrExpired = hold.ErrExpired

	// ErrTakenOver is the reason of a loss when the lock key holds another
	// owner's id (it expired and someone else acquired it). That owner's
	// key is left untouched.
	ErrTakenOver = hold.ErrTakenOver

	// ErrMaxHold is the reason of a loss when auto-renewal stopped at the
	// WithMaxHold limit and the expire then ran out.
	ErrMaxHold = hold.ErrMaxHold

	// ErrReleased is returned by Err after Release ended the hold.
	ErrReleased = hold.ErrReleased
)

// ErrInvalidArgument is matched, under errors.Is, by every error for bad
// input to a constructor, an option or a call: an empty name or id, a
// duration out of range, options that do not go together, an option the
// call does nothing with, a client that cannot work. The message says
// what was passed and what is allowed. Such errors are returned before any
// Redis command is sent.
var ErrInvalidArgument = errors.New("redislock: invalid argument")

// The argument errors a caller may branch on. Each matches
// ErrInvalidArgument as well as itself.
var (
	// ErrNilClient is returned by the constructors, Check, List and
	// ResetAll when the client is nil, or a nil pointer.
	ErrNilClient = invalid("nil client")

	// ErrUnsupportedClient is returned by New, List, ResetAll and Check for
	// a go-redis *redis.Ring: a Ring shards keys by its own hash, so a
	// lock's signal list may live on another shard than its key (a waiter
	// would sleep through the release), and WAIT, which has no key, would
	// go to any shard. Use a *redis.Client per Redis server, or a
	// ClusterClient.
	ErrUnsupportedClient = invalid("unsupported client")
)

// The other argument errors, one per check (tests tell them apart; see
// export_test.go). Each matches ErrInvalidArgument.
var (
	// errInvalidName is returned by New for an empty lock name.
	errInvalidName = invalid("empty lock name")

	// errInvalidSize is returned by NewSemaphore for a size below 1.
	errInvalidSize = invalid("semaphore size must be at least 1")

	// errInvalidID is returned by New when WithID is given an empty id.
	errInvalidID = invalid("empty owner id")

	// errInvalidExpire is returned by New when WithExpire is given a
	// negative duration, or a positive one below one millisecond (Redis
	// counts expires in whole milliseconds, and PEXPIRE 0 deletes a key),
	// and by NewSemaphore also for WithExpire(0): a permit must expire.
	errInvalidExpire = invalid("expire")

	// errInvalidSignalExpire is returned by New and ResetAll when
	// WithSignalExpire is given a duration below one millisecond.
	errInvalidSignalExpire = invalid("signal expire must be at least 1ms")

	// errInvalidPrefix is returned by New and ResetAll when WithKeyPrefix is
	// given an empty prefix (ResetAll would then scan every key).
	errInvalidPrefix = invalid("empty key prefix")

	// errInvalidHashTag is returned by New, ResetAll and List for hash-tagged
	// keys (WithHashTag, or a cluster client) when the name contains '}'
	// or the prefix contains '{' or '}': the keys of one lock would then
	// not share a slot.
	errInvalidHashTag = invalid("hash-tagged keys: the name must not contain '}', nor the prefix '{' or '}'")

	// errCrossSlot is returned by New, ResetAll and List for
	// python-redis-lock's untagged keys (WithHashTag(false)) on a
	// *redis.ClusterClient: the lock and signal keys would hash to
	// different slots.
	errCrossSlot = invalid("untagged keys on a cluster client: lock and signal keys would be in different slots")

	// errInvalidReplicaAck is returned by New and Check when WithReplicaAck
	// is given fewer than one replica, a timeout below 1ms, or a timeout
	// above a third of the client's read timeout (a waiter's BLPOP and the
	// WAIT behind it share two thirds of it: a longer WAIT would leave
	// BLPOP slices so short that waiting would turn into polling).
	errInvalidReplicaAck = invalid("replica ack needs n >= 1 and a timeout from 1ms to 1/3 of the read timeout")

	// errInvalidAutoRenewal is returned by New when WithAutoRenewal is given
	// without an expire: there would be nothing to renew.
	errInvalidAutoRenewal = invalid("auto-renewal needs an expire")

	// errInvalidMaxHold is returned by New when WithMaxHold is given without
	// WithAutoRenewal, or with a duration shorter than the expire.
	errInvalidMaxHold = invalid("max hold needs auto-renewal and must be at least the expire")

	// errInvalidDuration is returned by Extend for a negative duration, one
	// below one millisecond, 0 on a Lock without expire (0 means the Lock's
	// own expire), or one not longer than the safety margin
	// (WithSafetyMargin), with no Redis command sent.
	errInvalidDuration = invalid("duration must be at least 1ms and longer than the safety margin")

	// errInvalidSafetyMargin is returned by New for a WithSafetyMargin
	// below 0, above half the expire, or on a Lock without expire.
	errInvalidSafetyMargin = invalid("safety margin needs an expire and must be from 0 to half of it")
)

// invalid makes an argument error that matches both itself and
// ErrInvalidArgument.
func invalid(what string) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, what)
}

// joinErrs is errors.Join on one line: the messages of the errors that are
// not nil, joined by "; ". It returns nil when all are.
func joinErrs(errs ...error) error {
	var j joined
	for _, err := range errs {
		if err != nil {
			j = append(j, err)
		}
	}
	if len(j) == 0 {
		return nil
	}
	return j
}

type joined []error

func (j joined) Error() string {
	msgs := make([]string, len(j))
	for i, err := range j {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (j joined) Unwrap() []error { return j }
