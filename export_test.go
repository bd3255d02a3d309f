package redislock

// CloseTrackers stops every key tracker and closes its connections: the
// test main calls it before looking for leaked goroutines.
var CloseTrackers = closeAllTrackers

// Watched reports whether l's current hold is watched by a tracker.
func Watched(l *Lock) bool {
	h := l.current()
	return h != nil && h.watched()
}
