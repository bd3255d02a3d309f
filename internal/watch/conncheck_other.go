//go:build !unix

package watch

import "net"

// peerClosed cannot look at a socket here: blind, so the tracker pings its
// reader instead (see waitKick).
func peerClosed(net.Conn) (closed, gone, blind bool) { return false, false, true }
