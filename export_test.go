package redislock

// Watched reports whether l's current hold is watched by a tracker.
func Watched(l *Lock) bool {
	h := l.current()
	return h != nil && h.watched()
}
