package wire

import (
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Owner is what a default owner id ("<host>:<pid>:<uuid>", see the root's
// newOwnerID) says about the process that holds a lock: the log of a
// waiter and the command's status show it.
type Owner struct {
	Host string // the host name, as trimmed for the id
	PID  int    // the process id
}

// ParseOwner reads the host and process id out of an owner id made by
// the root package's default ("<host>:<pid>:<uuid>"). ok is false for any
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
