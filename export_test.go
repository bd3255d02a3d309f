package redislock

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/wait"
	"github.com/go-redis-lock/redislock/internal/watch"
)

// Watched reports whether l's current hold is watched by a tracker.
func Watched(l *Lock) bool {
	h := l.current()
	return h != nil && h.watched()
}

// SetTopologyPatience sets how long a call retries topology replies, until
// the test ends.
func SetTopologyPatience(t interface{ Cleanup(func()) }, d time.Duration) {
	old := topologyPatience
	topologyPatience = d
	t.Cleanup(func() { topologyPatience = old })
}

// LocalDeadline returns the local validity deadline of l's current hold
// (zero without one, or for a key without expire), and whether the hold
// has ended.
func LocalDeadline(l *Lock) (deadline time.Time, ended bool) {
	h := l.current()
	if h == nil {
		return time.Time{}, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.expires, h.err != nil
}

// TrackerPokes returns how many times trackers were poked so far.
func TrackerPokes() int64 { return watch.Count().Pokes }

// TrackerRounds counts the rounds of every tracker's goroutine (one per wake-up).
func TrackerRounds() int64 { return watch.Count().Rounds }

// WaitQueues returns how many local wait queues the process holds.
func WaitQueues() int { return wait.Queues() }

// TrackerWakeFires counts the firings of every tracker's wake timer.
func TrackerWakeFires() int64 { return watch.Count().WakeFires }

// TrackerChurnWake returns the wake timer's pause of client's trackers
// (the longest, on a cluster): zero while holds do not come and go.
func TrackerChurnWake(client redis.UniversalClient) time.Duration { return watch.ChurnWake(client) }

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

// RefusesTracking is watch.Refuses: whether err switches the key watch off.
var RefusesTracking = watch.Refuses

// SetRuntimeIdle sets how long a wait runtime keeps its connections after
// its last wait, until the test ends.
func SetRuntimeIdle(t interface{ Cleanup(func()) }, d time.Duration) {
	old := wait.SetIdle(d)
	t.Cleanup(func() { wait.SetIdle(old) })
}

// HasWaitRuntime reports whether client has a wait runtime.
func HasWaitRuntime(client redis.UniversalClient) bool { return wait.HasRuntime(client) }
