package redislock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-redis-lock/redislock/internal/hold"
)

// Errors about the state of a lock, as python-redis-lock's exceptions.
// Every call wraps them with the lock's name: compare with errors.Is.
var (
	// ErrLocked means the lock is held: by another owner, as Redis
	// answered, or by another goroutine through the same *Lock. Acquire
	// returns it, matching ctx's error too, when ctx ended while it waited;
	// TryAcquire at once. It is never returned when Redis did not answer.
	ErrLocked = errors.New("redislock: lock is held by another owner")

	// ErrUnreachable means Redis did not answer: an acquire's try got no
	// answer (the error then wraps the last Redis error, and matches ctx's
	// error if ctx ended first), and is not retried until ctx ends; or, as
	// the reason of a loss, no renewal succeeded before the expire ran out,
	// or a Release got no reply or could not be sent.
	ErrUnreachable = hold.ErrUnreachable

	// ErrNotAcquired is returned by a release, Extend or Guard when the key
	// no longer holds this holder's id. Nothing in Redis is changed.
	ErrNotAcquired = errors.New("redislock: lock is not held by this owner")

	// ErrAlreadyAcquired is returned by Acquire and TryAcquire when the key
	// already holds this Lock's caller-given id (WithID).
	ErrAlreadyAcquired = errors.New("redislock: lock is already acquired by this owner")

	// ErrNotReplicated is returned by Acquire, TryAcquire and Extend with
	// WithReplicaAck when fewer replicas than asked acknowledged the write
	// in time. An acquire then releases the key and does not hold the lock;
	// an Extend leaves it held, its new expire unconfirmed.
	ErrNotReplicated = errors.New("redislock: too few replicas acknowledged the write")

	// ErrNotExpirable is returned by Extend when the lock key has no expire.
	ErrNotExpirable = hold.ErrNotExpirable

	// ErrSizeMismatch is returned by a Semaphore's Acquire and TryAcquire,
	// which take nothing, when its holders use another size. The next
	// acquire after the last holder is gone sets the size.
	ErrSizeMismatch = errors.New("redislock: semaphore holders use another size")
)

// Errors about how a hold ended, returned by Lock.Err and used as the cause
// of Do's context.
var (
	// ErrLost means a holder can no longer show that it holds. It also
	// matches the reason: ErrExpired, ErrTakenOver, ErrUnreachable,
	// ErrMaxHold or ErrNotExpirable. Nothing is renewed after a loss, and
	// the key is never recreated.
	ErrLost = hold.ErrLost

	// ErrExpired is the reason of a loss when the lock key is gone
	// (expired, or deleted by Reset, ResetAll or another client), or the
	// expire ran out on the local clock of a Lock without auto-renewal.
	ErrExpired = hold.ErrExpired

	// ErrTakenOver is the reason of a loss when the lock key holds another
	// owner's id. That owner's key is left untouched.
	ErrTakenOver = hold.ErrTakenOver

	// ErrMaxHold is the reason of a loss when auto-renewal stopped at the
	// WithMaxHold limit and the expire then ran out.
	ErrMaxHold = hold.ErrMaxHold

	// ErrReleased is returned by Err after Release ended the hold.
	ErrReleased = hold.ErrReleased
)

// ErrInvalidArgument is matched by every error for bad input to a
// constructor, an option or a call, which is returned before any Redis
// command is sent. The message says what is allowed.
var ErrInvalidArgument = errors.New("redislock: invalid argument")

// The argument errors a caller may branch on. Each matches
// ErrInvalidArgument as well as itself.
var (
	// ErrNilClient is returned by the constructors, Check, List and
	// ResetAll for a nil client, or a nil pointer.
	ErrNilClient = invalid("nil client")

	// ErrUnsupportedClient is returned by the constructors, Check, List and
	// ResetAll for a *redis.Ring. Use a *redis.Client per server, or a
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

	// errNilFunc is returned by Do, TryDo and RDo for a nil fn, before
	// anything is sent.
	errNilFunc = invalid("nil func")

	// errZeroValue is returned by the calls of a Lock, Semaphore or
	// RWMutex that was not made by its constructor.
	errZeroValue = invalid("a zero value: make it with New, NewSemaphore or NewRWMutex")
)

// usable returns errZeroValue for a core its constructor did not make.
func (l *core) usable() error {
	if l.client == nil {
		return errZeroValue
	}
	return nil
}

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
