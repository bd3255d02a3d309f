//go:build unix

package watch

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the server closed c (its end of the socket
// reads as end-of-file), looking without reading: a one-byte MSG_PEEK,
// non-blocking. gone reports that c should be forgotten: the server closed
// it, or it was closed here. blind reports that c cannot be looked at (a
// custom Dialer's net.Conn that is not a syscall.Conn): the caller checks
// it another way. Call it only while nobody reads c.
func peerClosed(c net.Conn) (closed, gone, blind bool) {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, false, true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, true, false
	}
	var (
		n    int
		rerr error
	)
	// Control, not Read: Read fails once the connection's read deadline
	// has passed (go-redis leaves the last command's one set), which would
	// make every connection idle for longer than ReadTimeout look closed
	// here, and then forgotten, unwatched.
	if err := rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return false, true, false // closed here
	}
	switch {
	case n == 0 && rerr == nil:
		return true, true, false
	case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EWOULDBLOCK), errors.Is(rerr, syscall.EINTR):
		return false, false, false
	case rerr != nil:
		return true, true, false
	}
	return false, false, false
}
