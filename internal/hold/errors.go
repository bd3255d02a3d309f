package hold

import "errors"

// How a hold ends. The root package exports each under the same name,
// with its documentation.
var (
	ErrLost           = errors.New("redislock: lock lost")
	ErrExpired        = errors.New("redislock: lock key expired or was deleted")
	ErrTakenOver      = errors.New("redislock: lock key holds another owner's id")
	ErrUnreachable    = errors.New("redislock: Redis did not answer")
	ErrMaxHold        = errors.New("redislock: maximum hold time reached")
	ErrReleased       = errors.New("redislock: lock released")
	ErrAlreadyStarted = errors.New("redislock: auto-renewal already started")
	ErrNotExpirable   = errors.New("redislock: lock has no expire and cannot be extended")
)
