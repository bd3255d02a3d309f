package redislock

import "strings"

// DefaultKeyPrefix is the prefix of lock keys unless WithKeyPrefix says
// otherwise. It is python-redis-lock's: the lock named "reports" lives in the
// key "lock:reports" and its waiters wait on the list "lock-signal:reports".
const DefaultKeyPrefix = "lock:"

// keyScheme maps lock names to Redis keys.
//
// The lock key is prefix+name, exactly. The signal key's prefix is derived
// from the lock prefix by dropping one trailing ':' and appending
// "-signal:", so "lock:" gives python-redis-lock's "lock-signal:" and
// "_mayan_lock:" gives "_mayan_lock-signal:".
//
// The fence key of WithFencing is derived the same way with "-fence:"
// ("lock-fence:<name>"); no python-redis-lock key has that prefix.
type keyScheme struct {
	lockPrefix   string
	signalPrefix string
	fencePrefix  string
}

func newKeyScheme(prefix string) keyScheme {
	base := strings.TrimSuffix(prefix, ":")
	return keyScheme{
		lockPrefix:   prefix,
		signalPrefix: base + "-signal:",
		fencePrefix:  base + "-fence:",
	}
}

func (s keyScheme) lockKey(name string) string   { return s.lockPrefix + name }
func (s keyScheme) signalKey(name string) string { return s.signalPrefix + name }
func (s keyScheme) fenceKey(name string) string  { return s.fencePrefix + name }

// nameOf returns the lock name of a lock key, and false when key is not a
// lock key of this scheme (a signal or fence key, when their prefix itself
// starts with the lock prefix, or an unrelated key).
func (s keyScheme) nameOf(key string) (string, bool) {
	if !strings.HasPrefix(key, s.lockPrefix) {
		return "", false
	}
	for _, other := range []string{s.signalPrefix, s.fencePrefix} {
		if strings.HasPrefix(other, s.lockPrefix) && strings.HasPrefix(key, other) {
			return "", false
		}
	}
	return key[len(s.lockPrefix):], true
}

// scanPattern is the start of a SCAN MATCH pattern for the lock keys of the
// scheme: the prefix with glob metacharacters escaped. A name pattern (a
// glob, "*" for all) follows it.
func (s keyScheme) scanPattern() string {
	var b strings.Builder
	for _, r := range s.lockPrefix {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
