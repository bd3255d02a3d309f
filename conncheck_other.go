//go:build !unix

package redislock

import "net"

// peerClosed cannot look at a socket here: blind, so the tracker pings its
// reader instead (see waitKick).
func peerClosed(net.Conn) (closed, gone, blind bool) { return false, false, true }
