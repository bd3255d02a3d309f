package watch

import (
	"context"
	"time"
)

// waitKick waits for work. A connection of rd that the server closed (a
// CLIENT KILL, its idle timeout, a proxy's) takes the tracking of its keys
// with it, and nobody is told: every peekEvery, rd's sockets are looked at
// (no command sent), and one closed has every key read again on a new
// connection. After idlePing without any work, rd is pinged, which finds
// a connection lost without a word.
func (t *tracker) waitKick(c *trackConns) {
	next, work := t.workNow(c)
	if work {
		return
	}
	wait := idlePing
	if !next.IsZero() {
		wait = time.Until(next) + time.Millisecond
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	peek := time.NewTicker(peekEvery)
	defer peek.Stop()
	for {
		select {
		case <-t.kick:
			return
		case <-peek.C:
			if c.pongOverdue() { // the subscriber did not answer: make the pair again
				c.broken.Store(true)
				return
			}
			if c.pin != nil {
				t.checkMaster(c)
			}
			closed, blind := c.rdClosed()
			if closed {
				t.markAll()
				return
			}
			if blind { // a connection that cannot be looked at is pinged instead
				t.pingReader(c)
				return
			}
		case <-timer.C:
			if !next.IsZero() {
				return // an expected invalidation may be late: checked on the next round
			}
			t.pingReader(c)
			return
		}
	}
}

// workNow looks, before waitKick waits, for what it would find while
// waiting: the subscriber's ping unanswered (looked at here too: kicks may
// come more often than peekEvery), an expected invalidation late, a reader
// connection closed. It reports whether there is work for run now, and
// otherwise when the next expected invalidation is due (zero: none).
func (t *tracker) workNow(c *trackConns) (next time.Time, work bool) {
	if c.pongOverdue() {
		c.broken.Store(true)
		return time.Time{}, true
	}
	late, next := t.overdue()
	if closed, _ := c.rdClosed(); late || closed {
		if late {
			// Our own change brought no invalidation: is the
			// subscriber still there? (See the peek in waitKick.)
			c.pingSub()
		}
		t.markAll()
		return time.Time{}, true
	}
	return next, false
}

// checkMaster asks, in the background, whether the pair's connections
// still reach the master the Sentinels name, for a client that Sentinels
// manage: after a failover the watch's connections still go to the old
// master (a replica soon, or hung), where nobody changes the keys any
// more, and for seconds the old one may still call itself master. A pair
// that reaches another server is marked broken and run is poked: it makes
// the pair again, through the Sentinels, and reads every key again. When
// the Sentinels cannot tell, the other checks are left to find out. One
// check runs at a time, off run's goroutine: Sentinels that hang (a check
// waits up to trackerTimeout) hold nothing else up. It runs whatever the
// connections are (a custom Dialer's that cannot be peeked at included).
func (t *tracker) checkMaster(c *trackConns) {
	if !c.checking.CompareAndSwap(false, true) {
		return
	}
	c.checks.Add(1)
	go func() {
		defer c.checks.Done()
		defer c.checking.Store(false)
		ctx, cancel := context.WithTimeout(c.checkCtx, trackerTimeout)
		defer cancel()
		if c.pin.Moved(ctx) {
			c.broken.Store(true)
			t.poke()
		}
	}()
}

// pingReader pings rd; a new connection (the old one was lost) has every
// key read again on it.
func (t *tracker) pingReader(c *trackConns) {
	ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
	_ = c.rd.Ping(ctx)
	cancel()
	if c.rdNew.Swap(false) {
		t.markAll()
	}
}

// rdClosed reports whether the server closed one of rd's connections,
// forgetting those that are gone, and whether one of them cannot be looked
// at (see peerClosed).
func (c *trackConns) rdClosed() (closed, blind bool) {
	c.rdMu.Lock()
	defer c.rdMu.Unlock()
	live := c.rdConns[:0]
	for _, cn := range c.rdConns {
		cl, gone, bl := peerClosed(cn)
		closed, blind = closed || cl, blind || bl
		if !gone {
			live = append(live, cn)
		}
	}
	clear(c.rdConns[len(live):])
	c.rdConns = live
	return closed, blind
}
