package redislock

import (
	"os"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Default owner ids say who holds a lock: "<host>:<pid>:<uuid>", the host
// name and process id of the process, then a random UUIDv4 (122 random
// bits from crypto/rand), which alone makes the id unique. An operator
// reading the key (redislock status, List) sees which process holds it;
// python-redis-lock stores and compares any string, so it is unaffected.
//
// The host name is read once per process and trimmed to what a key reader
// can show on one line: letters, digits, '.', '-' and '_' (anything else
// becomes '_'), at most maxHostLen bytes; "unknown" when it cannot be read.

const maxHostLen = 64

var (
	ownerHost = ownerHostName()
	ownerPID  = strconv.Itoa(os.Getpid())
)

func ownerHostName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	if len(h) > maxHostLen {
		h = h[:maxHostLen]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, h)
}

// newOwnerID returns a fresh default owner id.
func newOwnerID() string {
	return ownerHost + ":" + ownerPID + ":" + uuid.NewString()
}

// Owner is what a default owner id says about the process that holds a
// lock.
type Owner struct {
	Host string // the host name, as trimmed for the id
	PID  int    // the process id
}

// ParseOwner reads the host and process id out of an owner id made by
// this package's default ("<host>:<pid>:<uuid>"). ok is false for any
// other id: one given with WithID, or python-redis-lock's random ones.
func ParseOwner(id string) (o Owner, ok bool) {
	rest, u, found := cutLast(id, ':')
	if !found || len(u) != 36 {
		return Owner{}, false
	}
	if _, err := uuid.Parse(u); err != nil {
		return Owner{}, false
	}
	host, pid, found := cutLast(rest, ':')
	if !found || host == "" {
		return Owner{}, false
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 || strconv.Itoa(n) != pid {
		return Owner{}, false
	}
	return Owner{Host: host, PID: n}, true
}

// cutLast slices s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}
