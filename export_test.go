package redislock

import "time"

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
