package watch

import (
	"strings"
	"time"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// run is the tracker's goroutine while it watches holds: it connects,
// starts the receiver and reads the keys marked dirty, until no hold is
// left. prev is the previous run's exit, waited for first.
func (t *tracker) run(prev <-chan struct{}, exited chan struct{}) {
	defer close(exited)
	if prev != nil {
		<-prev
	}
	var s runState
	defer t.exit(&s)
	for t.round(&s) {
	}
}

// runState is what run keeps from one round to the next.
type runState struct {
	c        *trackConns   // the connections the receiver reads
	recvDone chan struct{} // closed when the receiver exits; nil: none runs
	backoff  time.Duration
	idleFrom time.Time // the emptySince run last became idle for
	failures int       // connection attempts failed in a row
}

// round is one round of run's loop (each after a wake-up); false when run
// is to exit.
func (t *tracker) round(s *runState) bool {
	t.rounds.Add(1)
	c, exit, emptySince := t.roundState()
	switch {
	case exit:
		return false
	case !emptySince.IsZero():
		// Linger a moment: a worker that takes the lock again and
		// again keeps its tracker running, instead of stopping and
		// starting it (and its receiver, with a PING) every time.
		// Holds taken and ended meanwhile move emptySince on without
		// waking run: the linger counts from the last one.
		if !s.idleFrom.Equal(emptySince) {
			s.idleFrom = emptySince
			t.becomeIdle()
		}
		t.sleep(runLinger - time.Since(emptySince))
		return true
	}
	if !t.connect(s, c) {
		return true
	}
	if err := t.check(s.c); err != nil {
		s.backoff = nextBackoff(s.backoff)
		t.sleep(s.backoff)
		return true
	}
	s.backoff = 0
	t.mu.Lock()
	idle := len(t.holds) == 0 // check may have ended the last hold
	t.mu.Unlock()
	if !idle {
		t.waitKick(s.c)
	}
	return true
}

// roundState returns the tracker's connections for a round of run, or
// that run is to exit (closed, or no hold left for runLinger), or, when
// no hold is left, since when (run lingers).
func (t *tracker) roundState() (c *trackConns, exit bool, emptySince time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || (len(t.holds) == 0 && (t.retire || time.Since(t.emptySince) >= runLinger)) {
		t.running, t.lingering = false, false
		return nil, true, time.Time{}
	}
	t.lingering = len(t.holds) == 0
	if t.lingering {
		return nil, false, t.emptySince
	}
	return t.conns, false, time.Time{}
}

// connect gives s live connections and a receiver on them, making new
// ones in place of c when it is nil or broken; false when there are none
// this round (run goes round again).
func (t *tracker) connect(s *runState, c *trackConns) bool {
	if c != nil && c.broken.Load() {
		t.stopReceiving(s)
		t.dropConns(c)
		c = nil
	}
	if c == nil {
		nc, err := connectTracking(t.opt)
		if err != nil {
			t.connectFailed(s, err)
			return false
		}
		s.failures = 0
		t.mu.Lock()
		t.conns, t.all = nc, true
		t.mu.Unlock()
		c = nc
	}
	s.c = c
	if s.recvDone == nil {
		c.stopping.Store(false)
		s.recvDone = make(chan struct{})
		go t.receive(c, s.recvDone)
	}
	return true
}

// connectFailed deals with a failed connection attempt: a refusal ends
// the watch of every hold, a cluster node that stays down hands its holds
// over, anything else is retried after the backoff.
func (t *tracker) connectFailed(s *runState, err error) {
	if Refuses(err) {
		t.refuse(err) // no hold is left: run exits
		return
	}
	if s.failures++; s.failures >= handOverAfter && t.k.Sub != "" {
		// A cluster node that stays down (a failover promoted its
		// replica): watch the keys where they are now.
		s.failures = 0
		t.handOver() // no hold is left: run exits
		return
	}
	s.backoff = nextBackoff(s.backoff)
	t.sleep(s.backoff)
}

// stopReceiving stops the receiver of s, if one runs.
func (t *tracker) stopReceiving(s *runState) {
	if s.recvDone != nil {
		stopReceiver(s.c, s.recvDone)
		s.recvDone = nil
	}
}

// exit is run's last step: the receiver stops, and a tracker left without
// holds closes (retired) or goes idle, its connections kept trackerIdle.
func (t *tracker) exit(s *runState) {
	t.stopReceiving(s)
	t.mu.Lock()
	retire := t.retire && len(t.holds) == 0 && !t.running
	idle := !retire && !t.closed && t.idle == nil && !t.running
	if idle {
		t.idle = time.AfterFunc(trackerIdle, t.closeIdle)
	}
	t.mu.Unlock()
	switch {
	case retire:
		t.closeIdle()
	case idle:
		t.becomeIdle()
	}
}

// sleep waits d, or less if kicked.
func (t *tracker) sleep(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.kick:
	}
}

func nextBackoff(d time.Duration) time.Duration {
	return min(max(d*2, 10*time.Millisecond), time.Second)
}

// Refuses reports whether err says that the server (or an ACL,
// or a proxy) will not let a tracker work, however often it asks: the
// command or subcommand is unknown or its syntax refused (an older server,
// a proxy), or it is denied (NOPERM). Anything else (LOADING after a
// restart, "max number of clients reached", a connection lost) passes,
// and the tracker tries again. Each server words these its own way: Redis
// 6.0 answers "ERR syntax error" to CLIENT LIST ID, Redis 7 "ERR unknown
// subcommand", Redis 6 "ERR Unknown subcommand or wrong number of
// arguments" (see TestTrackingRefusalsOnEveryServer).
func Refuses(err error) bool {
	if !topology.IsReply(err) {
		return false
	}
	msg := strings.ToLower(err.Error())
	if strings.HasPrefix(msg, "noperm") {
		return true
	}
	for _, s := range [...]string{"unknown command", "unknown subcommand", "syntax error", "unsupported command", "wrong number of arguments"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// refuse records that Redis refused tracking: the holds it watched are no
// longer watched (renewal still finds their loss), and no new hold is
// watched before trackerUnavailableRetry. Each hold's logger says so.
func (t *tracker) refuse(err error) {
	t.mu.Lock()
	t.refused, t.retryAt = err, time.Now().Add(trackerUnavailableRetry)
	var hs []*Watch
	for key, holds := range t.holds {
		for h := range holds {
			h.clear()
			hs = append(hs, h)
		}
		t.dropKeyLocked(key)
	}
	t.emptiedLocked()
	t.mu.Unlock()
	for _, h := range hs {
		h.hold.Refused(err)
	}
}
