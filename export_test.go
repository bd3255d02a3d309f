package redislock

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
	"github.com/go-redis-lock/redislock/internal/wait"
	"github.com/go-redis-lock/redislock/internal/watch"
)

// Watched reports whether l's current hold is watched by a tracker.
func Watched(l *Lock) bool {
	h := l.current()
	return h != nil && h.Watched()
}

// SetTopologyPatience sets how long a call on client retries topology
// replies, until the test ends.
func SetTopologyPatience(t interface{ Cleanup(func()) }, client redis.UniversalClient, d time.Duration) {
	t.Cleanup(registry.Tune(client, registry.Tuning{Patience: d}))
}

// LocalDeadline returns the local validity deadline of l's current hold
// (zero without one, or for a key without expire), and whether the hold
// has ended.
func LocalDeadline(l *Lock) (deadline time.Time, ended bool) {
	h := l.current()
	if h == nil {
		return time.Time{}, true
	}
	return h.Deadline()
}

// TrackerPokes returns how many times client's trackers were poked so far.
func TrackerPokes(client redis.UniversalClient) int64 { return watch.Count(client).Pokes }

// TrackerRounds counts the rounds of client's trackers' goroutines (one per
// wake-up).
func TrackerRounds(client redis.UniversalClient) int64 { return watch.Count(client).Rounds }

// WaitQueues returns how many local wait queues the process holds.
func WaitQueues() int { return wait.Queues() }

// QueuedWaiters returns how many waiters the local wait queues hold.
func QueuedWaiters() int { return wait.Waiters() }

// TrackerLingers reports whether a tracker of client has no hold and its
// goroutine sleeps out its linger.
func TrackerLingers(client redis.UniversalClient) bool { return watch.Count(client).Lingering > 0 }

// TrackerWakeFires counts the firings of client's trackers' wake timers.
func TrackerWakeFires(client redis.UniversalClient) int64 { return watch.Count(client).WakeFires }

// AddWaitHook adds hook to the connections that client's waits run on (see
// internal/wait), as client.AddHook(hook) does to client's own: go-redis
// hooks do not reach a client made from another's options. A test that
// injects faults into waits through a hook calls both. The runtime keeps
// the hook (and its connections) until Shutdown.
func AddWaitHook(client redis.UniversalClient, hook redis.Hook) {
	if err := wait.AddHook(client, hook); err != nil {
		panic(err)
	}
}

// SetWaitCut sets how long a cancelled wait of client's gives the wake-up
// of its BLPOP before it cuts the read short, until the test ends; < 0
// (set before client's first wait): client's waits run in lane goroutines
// instead of their callers', as on a cluster.
func SetWaitCut(t interface{ Cleanup(func()) }, client redis.UniversalClient, d time.Duration) {
	t.Cleanup(registry.Tune(client, registry.Tuning{Cut: d}))
}

// RefusesTracking is watch.Refuses: whether err switches the key watch off.
var RefusesTracking = watch.Refuses

// SetRuntimeIdle sets how long client's wait runtimes keep their
// connections after their last wait, until the test ends.
func SetRuntimeIdle(t interface{ Cleanup(func()) }, client redis.UniversalClient, d time.Duration) {
	t.Cleanup(registry.Tune(client, registry.Tuning{Idle: d}))
}

// HasWaitRuntime reports whether client has a wait runtime.
func HasWaitRuntime(client redis.UniversalClient) bool { return wait.HasRuntime(client) }

// SetMaxSlice sets the longest single BLPOP of l's waits (for a test that
// needs a lane's BLPOP not to end on its own while it looks).
func SetMaxSlice(l *Lock, d time.Duration) { l.maxSlice = d }

// The argument errors of each check, for the tests that tell which check
// refused (users match ErrInvalidArgument).
var (
	ErrInvalidName         = errInvalidName
	ErrInvalidSize         = errInvalidSize
	ErrInvalidID           = errInvalidID
	ErrInvalidExpire       = errInvalidExpire
	ErrInvalidSignalExpire = errInvalidSignalExpire
	ErrInvalidPrefix       = errInvalidPrefix
	ErrInvalidHashTag      = errInvalidHashTag
	ErrCrossSlot           = errCrossSlot
	ErrInvalidReplicaAck   = errInvalidReplicaAck
	ErrInvalidAutoRenewal  = errInvalidAutoRenewal
	ErrInvalidMaxHold      = errInvalidMaxHold
	ErrInvalidDuration     = errInvalidDuration
	ErrInvalidSafetyMargin = errInvalidSafetyMargin
)

// MinRedisVersionForTest is the oldest Redis the library works with.
const MinRedisVersionForTest = minRedisVersion
