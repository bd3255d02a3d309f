package wire

import "strings"

// A Scheme maps lock names to Redis keys.
//
// The lock key is prefix+name, exactly. The signal key's prefix is derived
// from the lock prefix by dropping one trailing ':' and appending
// "-signal:", so "lock:" gives python-redis-lock's "lock-signal:" and
// "_mayan_lock:" gives "_mayan_lock-signal:".
//
// The fence key of WithFencing is derived the same way with "-fence:"
// ("lock-fence:<name>"); no python-redis-lock key has that prefix. The
// turn key is the signal key with ":turn" appended
// ("lock-signal:<name>:turn"); python-redis-lock ignores it.
//
// In the hash-tagged scheme (Redis Cluster) the name is wrapped in braces,
// "lock:{reports}", "lock-signal:{reports}", "lock-fence:{reports}", so
// that all of a lock's keys hash to one slot and its scripts may touch
// them together.
//
// A Semaphore's keys are derived the same way, with "-sem:",
// "-sem-signal:", "-sem-size:" and "-sem-fence:", and are always
// hash-tagged: "lock-sem:{pool}", "lock-sem-signal:{pool}" and so on. An
// RWMutex's likewise, with "-rw:" (the writer key), "-rw-wsignal:",
// "-rw-readers:", "-rw-writers:", "-rw-rsignal:", "-rw-waiting:",
// "-rw-admitted:" and "-rw-fence:".
type Scheme struct {
	lockPrefix   string
	signalPrefix string
	fencePrefix  string
	semPrefixes  [4]string // holders, signal, size, fence of a Semaphore
	rwPrefixes   [8]string // see rwKeys; the fence last
	tagged       bool
}

// NewScheme returns the scheme of prefix, hash-tagged or not.
func NewScheme(prefix string, tagged bool) Scheme {
	base := strings.TrimSuffix(prefix, ":")
	return Scheme{
		lockPrefix:   prefix,
		signalPrefix: base + "-signal:",
		fencePrefix:  base + "-fence:",
		semPrefixes:  [4]string{base + "-sem:", base + "-sem-signal:", base + "-sem-size:", base + "-sem-fence:"},
		rwPrefixes: [8]string{base + "-rw:", base + "-rw-wsignal:", base + "-rw-readers:", base + "-rw-writers:",
			base + "-rw-rsignal:", base + "-rw-waiting:", base + "-rw-admitted:", base + "-rw-fence:"},
		tagged: tagged,
	}
}

// SemKeys returns a Semaphore's keys {holders, signal, size} and its fence
// key, all tagged with the name.
func (s Scheme) SemKeys(name string) (keys []string, fence string) {
	tag := "{" + name + "}"
	return []string{s.semPrefixes[0] + tag, s.semPrefixes[1] + tag, s.semPrefixes[2] + tag}, s.semPrefixes[3] + tag
}

// RWKeys returns an RWMutex's keys, all tagged with the name: the writer
// key, the writers' signal list, the readers, the waiting writers, the
// readers' signal list, the waiting readers and the admitted readers (see
// lua/rw_lib.lua), and its fence key.
func (s Scheme) RWKeys(name string) (keys []string, fence string) {
	tag := "{" + name + "}"
	keys = make([]string, len(s.rwPrefixes)-1)
	for i, p := range s.rwPrefixes[:len(keys)] {
		keys[i] = p + tag
	}
	return keys, s.rwPrefixes[len(keys)] + tag
}

// RWNameOf returns the RWMutex name of a writer key, and false when key is
// not one.
func (s Scheme) RWNameOf(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, s.rwPrefixes[0])
	if !ok || len(name) < 2 || name[0] != '{' || name[len(name)-1] != '}' {
		return "", false
	}
	return name[1 : len(name)-1], true
}

// RWReaderNameOf returns the RWMutex name of a readers key.
func (s Scheme) RWReaderNameOf(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, s.rwPrefixes[2])
	if !ok || len(name) < 2 || name[0] != '{' || name[len(name)-1] != '}' {
		return "", false
	}
	return name[1 : len(name)-1], true
}

// SemNameOf returns the semaphore name of a holders key, and false when
// key is not one.
func (s Scheme) SemNameOf(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, s.semPrefixes[0])
	if !ok || len(name) < 2 || name[0] != '{' || name[len(name)-1] != '}' {
		return "", false
	}
	return name[1 : len(name)-1], true
}

// TagSafe reports whether name gives keys of one slot: in the tagged
// scheme a '}' in the name would end the tag early, and a brace in the
// prefix would make the tag come from it.
func (s Scheme) TagSafe(name string) bool {
	return !s.tagged || !(strings.ContainsRune(name, '}') || strings.ContainsAny(s.lockPrefix, "{}"))
}

// Tag returns name as it appears in keys: in braces when tagged.
func (s Scheme) Tag(name string) string {
	if s.tagged {
		return "{" + name + "}"
	}
	return name
}

// LockKey, SignalKey and FenceKey return the keys of the lock name.
func (s Scheme) LockKey(name string) string   { return s.lockPrefix + s.Tag(name) }
func (s Scheme) SignalKey(name string) string { return s.signalPrefix + s.Tag(name) }
func (s Scheme) FenceKey(name string) string  { return s.fencePrefix + s.Tag(name) }

// TurnKey is the key a release sets for a moment so that the waiter it
// woke gets its turn (see lua/release.lua): the signal key with a suffix,
// so that an ACL allowing the signal keys allows it, in the same slot.
func (s Scheme) TurnKey(name string) string { return s.SignalKey(name) + ":turn" }

// NameOf returns the lock name of a lock key, and false when key is not a
// lock key of this scheme (a signal or fence key, when their prefix itself
// starts with the lock prefix, or an unrelated key).
func (s Scheme) NameOf(key string) (string, bool) {
	if !strings.HasPrefix(key, s.lockPrefix) {
		return "", false
	}
	others := append([]string{s.signalPrefix, s.fencePrefix}, s.semPrefixes[:]...)
	for _, other := range append(others, s.rwPrefixes[:]...) {
		if strings.HasPrefix(other, s.lockPrefix) && strings.HasPrefix(key, other) {
			return "", false
		}
	}
	name := key[len(s.lockPrefix):]
	if s.tagged {
		if len(name) < 2 || name[0] != '{' || name[len(name)-1] != '}' {
			return "", false
		}
		return name[1 : len(name)-1], true
	}
	return name, true
}

// ScanPattern is the SCAN MATCH pattern for the lock keys of the scheme
// whose name matches the glob namePattern: the prefix with glob
// metacharacters escaped, then the name pattern (in braces when tagged).
func (s Scheme) ScanPattern(namePattern string) string {
	return escapeGlob(s.lockPrefix) + s.Tag(namePattern)
}

// SemScanPattern is the SCAN MATCH pattern for the holders keys of the
// semaphores whose name matches the glob namePattern.
func (s Scheme) SemScanPattern(namePattern string) string {
	return escapeGlob(s.semPrefixes[0]) + "{" + namePattern + "}"
}

// RWScanPatterns are the SCAN MATCH patterns for the writer keys and the
// readers keys of the RWMutexes whose name matches the glob namePattern.
func (s Scheme) RWScanPatterns(namePattern string) (writers, readers string) {
	tag := "{" + namePattern + "}"
	return escapeGlob(s.rwPrefixes[0]) + tag, escapeGlob(s.rwPrefixes[2]) + tag
}

// escapeGlob escapes the glob metacharacters of prefix.
func escapeGlob(prefix string) string {
	var b strings.Builder
	for i := 0; i < len(prefix); i++ { // bytes: a prefix need not be UTF-8
		switch c := prefix[i]; c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
