//go:build !unix

package redislock

import "net"

// peerClosed cannot look at a socket here: a reader connection the server
// closed is found by the next read of the key, at the latest after
// idlePing.
func peerClosed(net.Conn) (closed, gone bool) { return false, false }
