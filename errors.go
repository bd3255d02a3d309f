package redislock

import (
	"errors"
	"fmt"
)

// Errors about the state of a lock. They mirror python-redis-lock's
// exceptions; compare with errors.Is, never with ==, since every call wraps
// them with the lock's name.
var (
	// ErrLocked is returned by TryAcquire when another owner holds the lock,
	// and by Acquire when its context ends while it waits. In the second case
	// the error also matches the context's error (context.DeadlineExceeded
	// or context.Canceled) under errors.Is. Python returns False from
	// acquire in both cases.
	ErrLocked = errors.New("redislock: lock is held by another owner")

	// ErrNotAcquired is returned by Release and Extend when the lock key is
	// missing or holds another owner's id: the lock expired, was reset, or
	// was never taken with this id. Nothing in Redis is changed. Python's
	// NotAcquired.
	ErrNotAcquired = errors.New("redislock: lock is not held by this owner")

	// ErrAlreadyAcquired is returned by Acquire and TryAcquire when this
	// Lock already holds the lock or is acquiring it in another goroutine
	// (no Redis command is sent then), and when the key already holds a
	// caller-given id (WithID) that another Lock value acquired. Python's
	// AlreadyAcquired.
	ErrAlreadyAcquired = errors.New("redislock: lock is already acquired by this owner")

	// ErrNotExpirable is returned by Extend when the lock key has no expire
	// (it was taken with WithExpire(0), or by another client without one).
	// Python's NotExpirable.
	ErrNotExpirable = errors.New("redislock: lock has no expire and cannot be extended")
)

// ErrInvalidArgument is matched, under errors.Is, by every error below: bad
// input to New, an option or a call. Such errors are returned before any
// Redis command is sent.
var ErrInvalidArgument = errors.New("redislock: invalid argument")

// Argument errors. Each matches ErrInvalidArgument as well as itself.
var (
	// ErrNilClient is returned by New and ResetAll when the client is nil.
	ErrNilClient = invalid("nil client")

	// ErrInvalidName is returned by New for an empty lock name.
	ErrInvalidName = invalid("empty lock name")

	// ErrInvalidID is returned by New when WithID is given an empty id.
	ErrInvalidID = invalid("empty owner id")

	// ErrInvalidExpire is returned by New when WithExpire is given a
	// negative duration, or a positive one below one millisecond (Redis
	// counts expires in whole milliseconds, and PEXPIRE 0 deletes a key).
	ErrInvalidExpire = invalid("expire must be 0 (never) or at least 1ms")

	// ErrInvalidSignalExpire is returned by New and ResetAll when
	// WithSignalExpire is given a duration below one millisecond.
	ErrInvalidSignalExpire = invalid("signal expire must be at least 1ms")

	// ErrInvalidPrefix is returned by New and ResetAll when WithKeyPrefix is
	// given an empty prefix (ResetAll would then scan every key).
	ErrInvalidPrefix = invalid("empty key prefix")

	// ErrInvalidDuration is returned by Extend for a duration below one
	// millisecond, with no Redis command sent.
	ErrInvalidDuration = invalid("duration must be at least 1ms")
)

// invalid makes an argument error that matches both itself and
// ErrInvalidArgument.
func invalid(what string) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, what)
}
