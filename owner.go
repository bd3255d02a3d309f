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
