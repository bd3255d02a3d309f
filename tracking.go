package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// Watching held keys.
//
// Renewal finds a lost lock only when it next runs, up to two thirds of
// the expire later. To be told at once, a hold's key is watched with
// Redis's server-assisted client-side caching: a tracker reads the key on
// a connection with CLIENT TRACKING on, and Redis then sends an
// invalidation message the moment anyone changes the key (a Reset, a DEL,
// another owner's SET after it expired, an eviction, an expiry). The
// tracker reads the key again on each one, which also tracks it again: a
// value other than the hold's id ends the hold at once. Our own renewals
// and Extends change the key too; their re-read finds our id and changes
// nothing, so they cost one GET each.
//
// The invalidations travel, RESP2 style, as messages on the channel
// __redis__:invalidate of a second connection (CLIENT TRACKING ... REDIRECT
// <its id>): go-redis v9.0 does not deliver RESP3 pushes. A tracker thus
// has two connections of its own, made from the options of the user's
// client (or, on a cluster, of the master that holds the key), shared by
// all the holds of that client and node in this process. Its two
// goroutines run while it watches at least one hold, and runLinger after;
// its connections are kept trackerIdle longer for the next hold, then
// closed.
//
// Where tracking cannot be set up (an ACL without HELLO, CLIENT ID, CLIENT
// SETNAME, CLIENT LIST, CLIENT TRACKING, SUBSCRIBE or the channel, a proxy
// or server that refuses it, a client type other than *redis.Client and
// *redis.ClusterClient) holds are not watched, and a loss is found by
// renewal as before; Check says so. Redis sends no invalidation for a
// SWAPDB: such a change too is found by renewal.

const (
	invalidateChannel = "__redis__:invalidate"

	// trackerIdle is how long a tracker's connections are kept after its
	// last watched hold ended.
	trackerIdle = 30 * time.Second

	// trackerUnavailableRetry is how long a tracker that Redis refused
	// (an error reply while setting up) waits before it tries again.
	trackerUnavailableRetry = time.Minute

	// runLinger is how long a tracker's goroutines run on after its last
	// hold ended, for the next one.
	runLinger = time.Second

	// armDelay is how long a new hold's key waits for its first read: a
	// hold that ends sooner (a short job, a tight loop) costs no read. A
	// change of the key before the read is seen by the read itself.
	armDelay = 2 * time.Millisecond

	// churnWakeMax is the longest pause of the wake timer while holds
	// come and go faster than armDelay (see wakeFired): a hold taken then
	// that lasts is read this much later at most.
	churnWakeMax = 20 * time.Millisecond

	// idlePing is how long a tracker's connection may stay idle before it
	// is pinged: the subscriber after so long without a message (three
	// unanswered in a row count as a broken connection), the reader after
	// so long without a read. A lock renewed more often than that (an
	// expire up to 90 s) never causes one.
	idlePing = time.Minute

	// peekEvery is how often a tracker looks at its reader's sockets.
	peekEvery = time.Second

	// expectWithin is how soon the invalidation of our own change must
	// come (see expectBegin).
	expectWithin = time.Second

	// trackerTimeout bounds each of the tracker's own commands.
	trackerTimeout = 2 * time.Second

	// minReread and maxReread bound the pause before a key invalidated
	// again without a change is read again (see tracker.spurious).
	minReread = 10 * time.Millisecond
	maxReread = time.Second

	// handOverAfter is how many connection attempts in a row a cluster
	// node's tracker makes before it hands its holds over (see handOver).
	handOverAfter = 3
)

// trackers holds one tracker per (user client, node).
var trackers sync.Map // trackerKey -> *tracker

type trackerKey struct {
	client redis.UniversalClient
	addr   string // the node's address; "" for a *redis.Client
}

// Idle trackers, a few per server. A tracker whose last hold ended keeps
// its connections trackerIdle for the next hold of its client; but a
// process that makes a client per job (and closes it) would pile up two
// connections per job. So a server (address, user, database) keeps at most
// maxIdlePerServer trackers without holds (lingering or idle): when one
// more goes idle, the one idle the longest is closed.
var (
	idleMu sync.Mutex
	idleBy = map[serverID][]*tracker{} // oldest first
)

const maxIdlePerServer = 4

type serverID struct {
	network, addr, user string
	db                  int
}

// A tracker watches the keys of the holds of one client on one node.
type tracker struct {
	k      trackerKey
	server serverID
	opt    redis.Options // the node's, copied

	kick chan struct{} // one slot: work for run

	// mu guards the fields below.
	mu      sync.Mutex
	holds   map[string]map[*hold]uint64 // watched key -> its holds, each with its registration number
	seq     uint64                      // registration numbers given so far
	dirty   map[string]struct{}         // keys to read again
	expect  map[string]time.Time        // our own change of the key: its invalidation is due by then
	armAt   map[string]time.Time        // a new hold's key: first read not before then (armDelay)
	tracked map[string]bool             // read since its last invalidation: Redis will report its next change
	// spurious counts, per key, the invalidations in a row that no change
	// of ours explains: a re-read finds the key unchanged (Redis evicted
	// it from a full tracking table, tracking-table-max-keys). From the
	// second, its re-read waits until rereadAt, doubling from 10 ms to 1 s,
	// so that a table too small cannot turn re-reads into a loop.
	spurious map[string]int
	rereadAt map[string]time.Time
	all      bool          // read every watched key again
	running  bool          // run's goroutine is live
	exited   chan struct{} // closed when the last run has exited
	conns    *trackConns   // nil until connected, and after closing
	refused  error         // Redis refused tracking; retry after retryAt
	retryAt  time.Time
	idle     *time.Timer // closes the connections after trackerIdle
	wake     *time.Timer // pokes run at wakeAt when it has work by then (see wakeFired)
	wakeAt   time.Time   // when wake fires; zero when it is not pending
	// quietUntil is when the wake timer may fire next at the earliest,
	// and churnWake the pause that set it (see wakeFired); zero when
	// holds do not come and go.
	quietUntil time.Time
	churnWake  time.Duration
	// emptySince is when the last hold ended, zero while holds are
	// watched: run lingers runLinger after it, then exits.
	emptySince time.Time
	closed     bool // out of the registry: make a new one
	retire     bool // close as soon as no hold is left (another tracker of the server is idle now)
}

// trackConns are a tracker's connections: sub receives the invalidations,
// rd reads the keys with tracking on, redirected to sub.
type trackConns struct {
	sub      *redis.Client
	ps       *redis.PubSub
	rd       *redis.Client
	subID    atomic.Int64 // CLIENT ID of sub's connection
	subName  string       // the unique CLIENT SETNAME of sub's connection
	subConn  atomic.Bool  // sub has connected once: a second connection is refused
	rdConn   atomic.Bool  // rd has connected once
	rdNew    atomic.Bool  // rd has a new connection, on which no key is tracked yet
	stopping atomic.Bool  // the receiver is to exit
	pinged   atomic.Int64 // when sub was pinged, with nothing heard since (UnixNano); 0: not pinged

	rdMu    sync.Mutex
	rdConns []net.Conn // rd's connections, as dialed, for peerClosed

	broken atomic.Bool // a connection was lost: make new ones
}

// trackerFor returns the tracker of client for key: on a cluster, that of
// the key's master. It returns nil for a client it cannot track with.
func trackerFor(ctx context.Context, client redis.UniversalClient, key string) *tracker {
	var node *redis.Client
	switch c := client.(type) {
	case *redis.Client:
		node = c
	case *redis.ClusterClient:
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), trackerTimeout)
		defer cancel()
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil
		}
		node = n
	default:
		return nil
	}
	k := trackerKey{client: client}
	if _, ok := client.(*redis.ClusterClient); ok {
		k.addr = node.Options().Addr
	}
	if v, ok := trackers.Load(k); ok {
		return v.(*tracker)
	}
	opt := node.Options()
	t := &tracker{
		k:        k,
		server:   serverID{network: opt.Network, addr: opt.Addr, user: opt.Username, db: opt.DB},
		opt:      *opt,
		kick:     make(chan struct{}, 1),
		holds:    map[string]map[*hold]uint64{},
		dirty:    map[string]struct{}{},
		expect:   map[string]time.Time{},
		armAt:    map[string]time.Time{},
		tracked:  map[string]bool{},
		spurious: map[string]int{},
		rereadAt: map[string]time.Time{},
	}
	v, _ := trackers.LoadOrStore(k, t)
	return v.(*tracker)
}

// watchHold starts watching the key of h, which holds it under h.id. It
// does nothing when tracking is not available for client.
func watchHold(ctx context.Context, client redis.UniversalClient, key string, h *hold) {
	for range 3 { // a tracker closing as we come: take the next one
		t := trackerFor(ctx, client, key)
		if t == nil {
			return
		}
		switch t.add(key, h) {
		case addOK:
			h.setWatch(t, key)
			return
		case addUnavailable:
			return
		}
	}
}

type addResult int

const (
	addOK addResult = iota
	addUnavailable
	addClosed
)

func (t *tracker) add(key string, h *hold) addResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return addClosed
	case t.refused != nil && time.Now().Before(t.retryAt):
		return addUnavailable
	}
	hs := t.holds[key]
	if hs == nil {
		hs = map[*hold]uint64{}
		t.holds[key] = hs
	}
	t.seq++
	hs[h] = t.seq
	t.dirty[key] = struct{}{}
	if _, ok := t.armAt[key]; !ok {
		t.armAt[key] = time.Now().Add(armDelay)
	}
	if t.idle != nil {
		t.idle.Stop()
		t.idle = nil
	}
	t.retire = false
	t.emptySince = time.Time{}
	// run has nothing to do for the key before its first read: the wake
	// timer pokes it then, if the hold is still on (a hold that ends
	// sooner wakes nobody).
	t.wakeByLocked(t.armAt[key])
	if !t.running {
		t.running = true
		prev := t.exited
		t.exited = make(chan struct{})
		go t.run(prev, t.exited)
	}
	return addOK
}

// wakeByLocked has the wake timer fire no later than at, which is all run
// needs for a change that is not due before at: the timer then pokes run
// if it has work (see wakeFired). A wake-up pending for at or earlier
// already does; none pending, or one later, is (re)set. It is cheaper than
// a poke: no goroutine runs until the timer fires, and one timer serves
// every change until then. t.mu is held.
func (t *tracker) wakeByLocked(at time.Time) {
	if at.Before(t.quietUntil) {
		at = t.quietUntil
	}
	if !t.wakeAt.IsZero() && !t.wakeAt.After(at) {
		return
	}
	t.wakeAt = at
	d := time.Until(at)
	if t.wake == nil {
		t.wake = time.AfterFunc(d, t.wakeFired)
		return
	}
	t.wake.Reset(d)
}

// wakeFired is the wake timer's function: it pokes run when run has work
// by now (see dueLocked), and otherwise sets the timer again for when it
// will. In a tight acquire/release loop every hold ends before its key's
// first read, and the tracker is never empty for long: the timer fires
// once per armDelay, and run is not woken at all (a wake-up of run costs
// its timers, a look at its sockets and a goroutine switch, often on the
// other core).
func (t *tracker) wakeFired() {
	wakeFires.Add(1)
	t.mu.Lock()
	t.wakeAt = time.Time{}
	now := time.Now()
	due, next := t.dueLocked(now)
	if due || next.IsZero() {
		t.quietUntil, t.churnWake = time.Time{}, 0
	} else {
		// Nothing due: the holds the timer was set for ended before their
		// first read, and younger ones took their place. While that goes
		// on (a tight acquire/release loop), each such firing doubles the
		// pause before the next, up to churnWakeMax: a timer that fires
		// every armDelay costs this process a tenth more CPU per cycle on
		// one core (bench/, section 1). A hold that lasts is then read up
		// to churnWakeMax late, and the pause starts again from armDelay.
		t.churnWake = min(max(2*t.churnWake, armDelay), churnWakeMax)
		t.quietUntil = now.Add(t.churnWake)
		t.wakeByLocked(next)
	}
	t.mu.Unlock()
	if due {
		t.poke()
	}
}

// dueLocked reports whether run has work by now that only the wake timer
// tells it of: a new hold's key to read for the first time (see armDelay),
// a key whose re-read was put off (see spurious), or no hold left for armDelay (run then lingers, and exits runLinger
// after the last hold ended). Otherwise next is when it will, zero for
// never: holds whose keys are read already are run's work only when an
// invalidation or a poke comes. t.mu is held.
func (t *tracker) dueLocked(now time.Time) (due bool, next time.Time) {
	if len(t.holds) == 0 {
		if !t.running {
			return false, time.Time{}
		}
		at := t.emptySince.Add(armDelay)
		return !now.Before(at), at
	}
	for _, pending := range [...]map[string]time.Time{t.armAt, t.rereadAt} {
		for _, at := range pending {
			if !now.Before(at) {
				return true, time.Time{}
			}
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return false, next
}

// remove stops watching key for h; a no-op when it was not watched.
func (t *tracker) remove(key string, h *hold) {
	t.mu.Lock()
	defer t.mu.Unlock()
	hs := t.holds[key]
	if _, ok := hs[h]; !ok {
		return
	}
	delete(hs, h)
	if len(hs) == 0 {
		t.dropKeyLocked(key)
	}
	if len(t.holds) == 0 {
		// run lingers, then exits: it need not know at once (a hold taken
		// again within armDelay keeps it busy without a wake-up).
		t.emptiedLocked()
		t.wakeByLocked(t.emptySince.Add(armDelay))
	}
}

// dropKeyLocked forgets key, whose last hold is no longer watched: a
// first read still due for it (armAt) would otherwise have the wake timer
// poke run for nothing, every time it fires. t.mu is held.
func (t *tracker) dropKeyLocked(key string) {
	delete(t.holds, key)
	delete(t.dirty, key)
	delete(t.expect, key)
	delete(t.armAt, key)
	delete(t.tracked, key)
	delete(t.spurious, key)
	delete(t.rereadAt, key)
}

// emptiedLocked records when the tracker was left without holds, if it
// is: run's linger counts from then. t.mu is held.
func (t *tracker) emptiedLocked() {
	if len(t.holds) == 0 && t.emptySince.IsZero() {
		t.emptySince = time.Now()
	}
}

// pokes counts pokes, runRounds the rounds of run's loop (each after a
// wake-up), and wakeFires the wake timer's firings, for the tests (one
// atomic add: cheaper than the wake-up).
var pokes, runRounds, wakeFires atomic.Int64

// poke wakes run without blocking.
func (t *tracker) poke() {
	pokes.Add(1)
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// markAll has every watched key read again.
func (t *tracker) markAll() {
	t.mu.Lock()
	t.all = true
	clear(t.expect)
	clear(t.armAt)
	clear(t.tracked)
	clear(t.rereadAt)
	t.mu.Unlock()
	t.poke()
}

// expectBegin records that we are about to change key (a renewal or an
// Extend is being sent), and expectEnd(key, changed) that the reply came:
// when the change was made (changed), Redis must send its invalidation
// within expectWithin of the reply, as it does for any change of a tracked
// key, unless it already came. When none comes, the watch is not working
// (the reader's connection died without a word, say) and every key is read
// again, which replaces a dead connection and tracks them anew. The
// invalidation may come before the reply: it is counted from expectBegin.
func (t *tracker) expectBegin(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Only a tracked key's change is reported: one not read yet (a new
	// hold's, see armDelay) or not read again since its last invalidation
	// has nothing to expect; its read is on its way.
	if t.tracked[key] {
		t.expect[key] = time.Time{} // pending: no deadline until the reply
	}
}

func (t *tracker) expectEnd(key string, changed bool) {
	t.mu.Lock()
	due, ok := t.expect[key]
	switch {
	case !ok: // its invalidation came already, or the key is no longer watched
	case !changed:
		delete(t.expect, key)
	case due.IsZero():
		t.expect[key] = time.Now().Add(expectWithin)
	}
	t.mu.Unlock()
	if ok && changed {
		t.poke() // run sets its timer
	}
}

// overdue reports whether an expected invalidation is late, and when the
// next one is due (zero: none expected). A new hold's first read is not
// waited for here: the wake timer pokes run for it (see wakeFired).
func (t *tracker) overdue() (late bool, next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for _, due := range t.expect {
		if due.IsZero() {
			continue // its change is still in flight
		}
		if now.After(due) {
			return true, time.Time{}
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return false, next
}

// markKeys has keys read again, those that are watched.
func (t *tracker) markKeys(keys []string) {
	t.mu.Lock()
	n := 0
	now := time.Now()
	for _, k := range keys {
		if _, ours := t.expect[k]; ours {
			delete(t.spurious, k)
		} else if _, held := t.holds[k]; held {
			t.spurious[k]++
			if c := t.spurious[k]; c > 1 {
				t.rereadAt[k] = now.Add(min(minReread<<min(c-2, 10), maxReread))
			}
		}
		delete(t.expect, k)
		delete(t.armAt, k)
		delete(t.tracked, k)
		if _, ok := t.holds[k]; ok {
			t.dirty[k] = struct{}{}
			n++
		}
	}
	t.mu.Unlock()
	if n > 0 {
		t.poke()
	}
}

// run is the tracker's goroutine while it watches holds: it connects,
// starts the receiver and reads the keys marked dirty, until no hold is
// left. prev is the previous run's exit, waited for first.
func (t *tracker) run(prev <-chan struct{}, exited chan struct{}) {
	defer close(exited)
	if prev != nil {
		<-prev
	}
	var (
		c        *trackConns
		recvDone chan struct{}
		backoff  time.Duration
	)
	defer func() {
		if recvDone != nil {
			stopReceiver(c, recvDone)
		}
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
	}()
	var idleFrom time.Time // the emptySince run last became idle for
	failures := 0          // connection attempts failed in a row
	for {
		runRounds.Add(1)
		t.mu.Lock()
		if t.closed || (len(t.holds) == 0 && (t.retire || time.Since(t.emptySince) >= runLinger)) {
			t.running = false
			t.mu.Unlock()
			return
		}
		if len(t.holds) == 0 {
			// Linger a moment: a worker that takes the lock again and
			// again keeps its tracker running, instead of stopping and
			// starting it (and its receiver, with a PING) every time.
			// Holds taken and ended meanwhile move emptySince on without
			// waking run: the linger counts from the last one.
			since := t.emptySince
			t.mu.Unlock()
			if !idleFrom.Equal(since) {
				idleFrom = since
				t.becomeIdle()
			}
			t.sleep(runLinger - time.Since(since))
			continue
		}
		c = t.conns
		t.mu.Unlock()

		if c != nil && c.broken.Load() {
			if recvDone != nil {
				stopReceiver(c, recvDone)
				recvDone = nil
			}
			t.dropConns(c)
			c = nil
		}
		if c == nil {
			nc, err := connectTracking(t.opt)
			if err != nil {
				if refusesTracking(err) {
					t.refuse(err)
					continue // no hold is left: exits
				}
				if failures++; failures >= handOverAfter && t.k.addr != "" {
					// A cluster node that stays down (a failover
					// promoted its replica): watch the keys where
					// they are now.
					failures = 0
					t.handOver()
					continue // no hold is left: exits
				}
				backoff = nextBackoff(backoff)
				t.sleep(backoff)
				continue
			}
			failures = 0
			t.mu.Lock()
			t.conns, t.all = nc, true
			t.mu.Unlock()
			c = nc
		}
		if recvDone == nil {
			c.stopping.Store(false)
			recvDone = make(chan struct{})
			go t.receive(c, recvDone)
		}
		if err := t.check(c); err != nil {
			backoff = nextBackoff(backoff)
			t.sleep(backoff)
			continue
		}
		backoff = 0
		t.mu.Lock()
		idle := len(t.holds) == 0 // check may have ended the last hold
		t.mu.Unlock()
		if !idle {
			t.waitKick(c)
		}
	}
}

// waitKick waits for work. A connection of rd that the server closed (a
// CLIENT KILL, its idle timeout, a proxy's) takes the tracking of its keys
// with it, and nobody is told: every peekEvery, rd's sockets are looked at
// (no command sent), and one closed has every key read again on a new
// connection. After idlePing without any work, rd is pinged, which finds
// a connection lost without a word.
func (t *tracker) waitKick(c *trackConns) {
	late, next := t.overdue()
	if closed, _ := c.rdClosed(); late || closed {
		if late {
			// Our own change brought no invalidation: is the
			// subscriber still there? (See the peek below.)
			c.pingSub()
		}
		t.markAll()
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
			closed, blind := c.rdClosed()
			if closed {
				t.markAll()
				return
			}
			if blind { // a connection that cannot be looked at is pinged instead
				t.pingReader(c)
				return
			}
			if t.opt.Addr == failoverAddr && !t.stillMaster(c) {
				return // run makes the connections again, through the Sentinels
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

// failoverAddr is the Addr of the options of go-redis's Sentinel failover
// client (NewFailoverClient): its dialer asks the Sentinels for the master.
const failoverAddr = "FailoverClient"

// stillMaster reports whether rd's server is still the one the caller's
// client reaches, for a client that Sentinels manage: after a failover the
// watch's connections still go to the old master (a replica soon, or
// hung), where nobody changes the keys any more, and for seconds the old
// one may still call itself master; go-redis moves the caller's client to
// the new one as the Sentinels announce it. Servers are told apart by their
// run_id (INFO server). A pair whose server is another, or does not answer
// in time, is marked broken: run makes it again, through the Sentinels,
// and reads every key again. When the caller's client cannot tell (it
// fails, or INFO is denied), the other checks are left to find out.
func (t *tracker) stillMaster(c *trackConns) bool {
	ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
	defer cancel()
	ours, err := runID(ctx, c.rd)
	if err != nil && !topology.IsReply(err) {
		c.broken.Store(true) // hung, or lost
		return false
	}
	theirs, err2 := runID(ctx, t.k.client)
	if err != nil || err2 != nil || ours == theirs {
		return true
	}
	c.broken.Store(true)
	return false
}

// runID returns the run_id of the server c reaches.
func runID(ctx context.Context, c redis.UniversalClient) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("redislock: no run_id in INFO server")
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

// becomeIdle puts t among the idle trackers of its server, closing the one
// idle the longest when there are more than maxIdlePerServer (at once, or
// as soon as its own lingering ends). One that watches holds again is
// skipped and dropped from the list.
func (t *tracker) becomeIdle() {
	idleMu.Lock()
	list := slices.DeleteFunc(idleBy[t.server], func(x *tracker) bool { return x == t })
	list = append(list, t)
	var old *tracker
	if len(list) > maxIdlePerServer {
		old, list = list[0], list[1:]
	}
	idleBy[t.server] = list
	idleMu.Unlock()
	if old == nil {
		return
	}
	old.mu.Lock()
	busy := len(old.holds) > 0 || old.closed
	running := old.running
	if !busy {
		old.retire = true
	}
	old.mu.Unlock()
	switch {
	case busy:
	case running:
		old.poke() // it exits and closes
	default:
		old.closeIdle()
	}
}

// forgetIdle takes t out of its server's idle trackers.
func forgetIdle(t *tracker) {
	idleMu.Lock()
	defer idleMu.Unlock()
	list := slices.DeleteFunc(idleBy[t.server], func(x *tracker) bool { return x == t })
	if len(list) == 0 {
		delete(idleBy, t.server)
	} else {
		idleBy[t.server] = list
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

// refusesTracking reports whether err says that the server (or an ACL,
// or a proxy) will not let a tracker work, however often it asks: the
// command or subcommand is unknown or its syntax refused (an older server,
// a proxy), or it is denied (NOPERM). Anything else (LOADING after a
// restart, "max number of clients reached", a connection lost) passes,
// and the tracker tries again. Each server words these its own way: Redis
// 6.0 answers "ERR syntax error" to CLIENT LIST ID, Redis 7 "ERR unknown
// subcommand", Redis 6 "ERR Unknown subcommand or wrong number of
// arguments" (see TestTrackingRefusalsOnEveryServer).
func refusesTracking(err error) bool {
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
	var hs []*hold
	for key, holds := range t.holds {
		for h := range holds {
			h.clearWatch()
			hs = append(hs, h)
		}
		t.dropKeyLocked(key)
	}
	t.emptiedLocked()
	t.mu.Unlock()
	for _, h := range hs {
		h.ev.watchRefused(h.info(), err)
	}
}

// check reads the dirty keys (all of them on new connections) and ends
// every hold whose key no longer holds its id.
func (t *tracker) check(c *trackConns) error {
	ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
	defer cancel()
	t.mu.Lock()
	var keys []string
	upTo := t.seq // the holds the reads below may judge: those registered before they are sent
	if t.all {
		for k := range t.holds {
			keys = append(keys, k)
		}
		t.all = false
		clear(t.dirty)
		clear(t.armAt)
	} else {
		now := time.Now()
		for k := range t.dirty {
			if at, ok := t.armAt[k]; ok {
				if now.Before(at) {
					t.wakeByLocked(at) // a new hold's key: read it at armAt (see armDelay)
					continue
				}
				delete(t.armAt, k)
			}
			if at, ok := t.rereadAt[k]; ok {
				if now.Before(at) {
					t.wakeByLocked(at) // invalidated again and again, unchanged: read it later
					continue
				}
				delete(t.rereadAt, k)
			}
			keys = append(keys, k)
			delete(t.dirty, k)
		}
	}
	t.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	pipe := c.rd.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Get(ctx, k)
	}
	_, err := pipe.Exec(ctx)
	if c.rdNew.Swap(false) {
		t.markAll() // a new connection of rd: keys read before are not tracked on it
	}
	if err != nil && !errors.Is(err, redis.Nil) && !topology.IsReply(err) {
		// The connection failed: some go-redis v9 releases then leave
		// the GETs without an error and with an empty value. Nothing was
		// read; read it all again.
		t.requeue(keys)
		return err
	}
	var failed error
	for i, key := range keys {
		v, err := cmds[i].Result()
		missing := errors.Is(err, redis.Nil)
		kind, _ := topology.Classify(err)
		switch {
		case missing:
		case redis.HasErrorPrefix(err, "WRONGTYPE"):
			// Not a string: someone else made the key something else.
			v = ""
		case kind == topology.Moved || kind == topology.Ask || kind == topology.ReadOnly:
			// This node no longer answers for the key (its slot moved,
			// or the node became a replica). Its holds are watched
			// again where the key is now; meanwhile renewal finds a
			// loss.
			for _, h := range t.unwatchKey(key) {
				h.rewatch()
			}
			continue
		case err != nil:
			// LOADING, a connection lost...: read it again after the
			// backoff.
			failed = err
			t.requeue([]string{key})
			continue
		}
		t.settle(key, v, missing, upTo)
	}
	return failed
}

// requeue has keys read again after the backoff (no poke: it would spin).
func (t *tracker) requeue(keys []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, key := range keys {
		if _, ok := t.holds[key]; ok {
			t.dirty[key] = struct{}{}
		}
	}
}

// settle records that key was read (Redis now tracks it) and ends every
// hold of key whose id is not v (missing: no key) among
// those registered up to upTo: a hold registered later was taken after the
// read was sent (a quick hand-over between two Locks of this process), and
// the value read says nothing of it; it is read again for itself.
func (t *tracker) settle(key, v string, missing bool, upTo uint64) {
	var lostHolds []*hold
	t.mu.Lock()
	if _, ok := t.holds[key]; ok {
		t.tracked[key] = true
	}
	for h, n := range t.holds[key] {
		if n > upTo {
			continue
		}
		if missing || h.id != v {
			lostHolds = append(lostHolds, h)
			delete(t.holds[key], h)
		}
	}
	if len(t.holds[key]) == 0 {
		t.dropKeyLocked(key)
		t.emptiedLocked()
	}
	t.mu.Unlock()
	reason := ErrTakenOver
	if missing {
		reason = ErrExpired
	}
	for _, h := range lostHolds {
		h.end(lost(reason))
	}
}

// unwatchKey stops watching key for all its holds.
func (t *tracker) unwatchKey(key string) []*hold {
	t.mu.Lock()
	defer t.mu.Unlock()
	var hs []*hold
	for h := range t.holds[key] {
		h.clearWatch()
		hs = append(hs, h)
	}
	t.dropKeyLocked(key)
	t.emptiedLocked()
	return hs
}

// handOver stops watching every key and has their holds watched again,
// each on its key's node as the slot map says then (see rewatch): a
// cluster node that stays unreachable (a dead master, replaced by its
// replica) must not keep them.
func (t *tracker) handOver() {
	t.mu.Lock()
	var hs []*hold
	for key, holds := range t.holds {
		for h := range holds {
			h.clearWatch()
			hs = append(hs, h)
		}
		t.dropKeyLocked(key)
	}
	t.emptiedLocked()
	t.mu.Unlock()
	for _, h := range hs {
		h.rewatch()
	}
}

// Pauses before a hold is watched again after its key moved (see
// rewatch): doubling while the key is still elsewhere (a slot that
// migrates answers ASK until the migration ends).
const (
	minRewatch = 50 * time.Millisecond
	maxRewatch = time.Second
)

// rewatch has h watched again after a pause, on the node that serves its
// key then (the slot map reloaded first). It does nothing once the hold
// ended or was unwatched for good (a Release under way).
func (h *hold) rewatch() {
	h.mu.Lock()
	h.rewatchWait = min(max(h.rewatchWait*2, minRewatch), maxRewatch)
	d := h.rewatchWait
	h.mu.Unlock()
	go func() {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-h.done:
			return
		case <-timer.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
		defer cancel()
		if c, ok := h.client.(*redis.ClusterClient); ok {
			_ = c.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil }) // reloads the slot map
		}
		watchHold(ctx, h.client, h.lockKey[0], h)
	}()
}

// receive is the receiver goroutine: it marks the keys Redis invalidates.
func (t *tracker) receive(c *trackConns, done chan struct{}) {
	defer close(done)
	errs := 0 // in a row
	var backoff time.Duration
	for !c.stopping.Load() {
		wait := idlePing
		if c.pinged.Load() != 0 {
			wait = trackerTimeout
		}
		msg, err := c.ps.ReceiveTimeout(context.Background(), wait)
		if c.stopping.Load() {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if c.pongOverdue() {
					// Pinged, and nothing came back: a connection
					// lost without a word (a middlebox dropped it).
					c.broken.Store(true)
					t.poke()
					return
				}
				c.pingSub()
				continue
			}
			if errs++; c.broken.Load() || errs >= 3 {
				// The connection was lost and go-redis's own new one
				// refused (see connectTracking), or could not be made
				// (the node is down): run makes a new pair, or hands
				// the holds over.
				c.broken.Store(true)
				t.poke()
				return
			}
			// A payload go-redis cannot parse (the null of a FLUSHALL:
			// every key), or the connection lost: either way,
			// invalidations may have been missed.
			t.markAll()
			backoff = nextBackoff(backoff)
			time.Sleep(backoff)
			continue
		}
		errs, backoff = 0, 0
		c.pinged.Store(0)
		switch m := msg.(type) {
		case *redis.Message:
			if m.Channel != invalidateChannel {
				continue
			}
			if m.PayloadSlice != nil {
				t.markKeys(m.PayloadSlice)
			} else {
				t.markAll()
			}
		}
	}
}

// pingSub pings sub, unless a ping is already waiting for its answer; the
// answer (or any message) clears pinged.
func (c *trackConns) pingSub() {
	if !c.pinged.CompareAndSwap(0, time.Now().UnixNano()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
	_ = c.ps.Ping(ctx)
	cancel()
}

// pongOverdue reports whether sub was pinged trackerTimeout ago or more
// and nothing has come since.
func (c *trackConns) pongOverdue() bool {
	at := c.pinged.Load()
	return at != 0 && time.Since(time.Unix(0, at)) >= trackerTimeout
}

// stopReceiver makes the receiver exit and waits for it: a ping wakes its
// read, or, on a connection that does not answer, closing it does.
func stopReceiver(c *trackConns, done chan struct{}) {
	c.stopping.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
	_ = c.ps.Ping(ctx)
	cancel()
	select {
	case <-done:
	case <-time.After(trackerTimeout):
		_ = c.ps.Close()
		<-done
	}
}

// dropConns closes c, the tracker's broken connections.
func (t *tracker) dropConns(c *trackConns) {
	t.mu.Lock()
	if t.conns == c {
		t.conns = nil
	}
	t.mu.Unlock()
	c.close()
}

// closeIdle closes the connections of a tracker that watched nothing for
// trackerIdle and takes it out of the registry.
func (t *tracker) closeIdle() {
	t.mu.Lock()
	if t.running || len(t.holds) > 0 || t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	c := t.conns
	if t.idle != nil {
		t.idle.Stop()
	}
	t.conns, t.idle = nil, nil
	t.mu.Unlock()
	trackers.CompareAndDelete(t.k, t)
	forgetIdle(t)
	if c != nil {
		c.close()
	}
}

func (c *trackConns) close() {
	_ = c.ps.Close()
	_ = c.sub.Close()
	_ = c.rd.Close()
}

// errTrackerConn is the error of a tracker connection that go-redis would
// dial again on its own (see connectTracking).
var errTrackerConn = errors.New("redislock: tracker connection lost")

// connectTracking opens a tracker's connections to the node of opt: sub,
// switched to RESP2, named uniquely and subscribed to the invalidation
// channel, and rd, switched to RESP2, with tracking on and redirected to
// sub. An error reply means Redis (or an ACL, or a proxy) refuses
// tracking.
//
// A redirect goes to a client id, and ids start again from 1 when Redis
// restarts: rd must never redirect to an id that belongs to someone
// else's connection, which would then receive invalidation pushes in the
// middle of its replies. So each connection of rd checks, on itself, that
// the id is sub's (by sub's unique name) before it redirects; one that
// finds sub gone marks the pair broken. rd may have several connections
// (go-redis v9.23 sends pipelines on a pool of their own) and gets new
// ones after a broken one: keys are tracked per connection, so every key
// is read again after a new one. sub is never replaced on its own (rd's
// connections redirect to its id): a second connection fails, marks the
// pair broken, and the tracker makes a new pair.
func connectTracking(opt redis.Options) (*trackConns, error) {
	ctx, cancel := context.WithTimeout(context.Background(), trackerTimeout)
	defer cancel()
	c := &trackConns{subName: "redislock-tracker-" + uuid.NewString()}
	userOnConnect := opt.OnConnect
	opt.ClientName = "" // ours are named below, or left unnamed
	so := opt
	so.PoolSize, so.MinIdleConns = 1, 0
	so.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		if c.subConn.Load() {
			c.broken.Store(true)
			return errTrackerConn
		}
		if userOnConnect != nil {
			if err := userOnConnect(ctx, cn); err != nil {
				return err
			}
		}
		// RESP2: the invalidations then come as Pub/Sub messages, which
		// every go-redis v9 reads.
		if err := connDo(ctx, cn, "HELLO", "2"); err != nil {
			return err
		}
		if err := connDo(ctx, cn, "CLIENT", "SETNAME", c.subName); err != nil {
			return err
		}
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return err
		}
		c.subID.Store(id)
		c.subConn.Store(true)
		return nil
	}
	c.sub = redis.NewClient(&so)
	c.ps = c.sub.Subscribe(ctx, invalidateChannel)
	if _, err := c.ps.ReceiveTimeout(ctx, trackerTimeout); err != nil {
		_ = c.ps.Close()
		_ = c.sub.Close()
		return nil, err
	}
	ro := opt
	ro.PoolSize, ro.MinIdleConns, ro.MaxRetries = 1, 0, -1
	dial := opt.Dialer
	if dial == nil {
		dial = (&net.Dialer{Timeout: opt.DialTimeout}).DialContext
	}
	ro.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := dial(ctx, network, addr)
		if err == nil {
			c.rdMu.Lock()
			c.rdConns = append(c.rdConns, cn)
			c.rdMu.Unlock()
		}
		return cn, err
	}
	ro.OnConnect = c.rdOnConnect(userOnConnect)
	c.rd = redis.NewClient(&ro)
	if err := c.rd.Ping(ctx).Err(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// connDo sends one command on cn (go-redis v9.0's Conn has no Do).
func connDo(ctx context.Context, cn *redis.Conn, args ...any) error {
	cmd := redis.NewCmd(ctx, args...)
	_ = cn.Process(ctx, cmd)
	return cmd.Err()
}

// rdOnConnect is the OnConnect of rd's connections (see connectTracking):
// it switches to RESP2, checks that sub's id is sub's and redirects
// tracking to it.
func (c *trackConns) rdOnConnect(userOnConnect func(context.Context, *redis.Conn) error) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		if userOnConnect != nil {
			if err := userOnConnect(ctx, cn); err != nil {
				return err
			}
		}
		// RESP2: no push (tracking-redir-broken) ever comes on rd.
		if err := connDo(ctx, cn, "HELLO", "2"); err != nil {
			return err
		}
		id := c.subID.Load()
		list := redis.NewStringCmd(ctx, "CLIENT", "LIST", "ID", id)
		_ = cn.Process(ctx, list)
		if err := list.Err(); topology.IsReply(err) && strings.Contains(err.Error(), "syntax error") {
			// Redis 6.0 has no CLIENT LIST ID: the whole list, then.
			list = redis.NewStringCmd(ctx, "CLIENT", "LIST")
			_ = cn.Process(ctx, list)
		}
		if err := list.Err(); err != nil {
			return err
		}
		if !strings.Contains(clientLine(list.Val(), id), " name="+c.subName+" ") {
			c.broken.Store(true)
			return fmt.Errorf("%w: client %d is not the tracker's subscriber", errTrackerConn, id)
		}
		if err := connDo(ctx, cn, "CLIENT", "TRACKING", "ON", "REDIRECT", id); err != nil {
			return err
		}
		if c.rdConn.Swap(true) {
			c.rdNew.Store(true)
		}
		return nil
	}
}

// clientLine returns the line of client id in the reply of CLIENT LIST
// ("" when it is not there).
func clientLine(list string, id int64) string {
	prefix := "id=" + strconv.FormatInt(id, 10) + " "
	for line := range strings.Lines(list) {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// setWatch records that h is watched by t under key. A hold that ended
// meanwhile is taken out again.
func (h *hold) setWatch(t *tracker, key string) {
	h.mu.Lock()
	ended := h.err != nil || h.unwatched
	if !ended {
		h.watcher, h.watchKey = t, key
	}
	h.mu.Unlock()
	if ended {
		t.remove(key, h)
	}
}

// clearWatch forgets h's tracker; called under the tracker's lock.
func (h *hold) clearWatch() {
	h.mu.Lock()
	h.watcher = nil
	h.mu.Unlock()
}

// unwatch stops watching h's key. Called before a release is sent, so that
// the tracker does not read our own release as a loss, and when the hold
// ends.
func (h *hold) unwatch() {
	h.mu.Lock()
	t, key := h.watcher, h.watchKey
	h.watcher, h.unwatched = nil, true
	h.mu.Unlock()
	if t != nil {
		t.remove(key, h)
	}
}

// watched reports whether a tracker watches h's key.
func (h *hold) watched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watcher != nil
}

// closeTrackers stops the trackers of the clients ours accepts and closes
// their connections. Holds they watched are no longer watched: a loss is
// then found at the next renewal or the local deadline. Holds acquired
// later start trackers again.
func closeTrackers(ours func(redis.UniversalClient) bool) {
	trackers.Range(func(k, v any) bool {
		if !ours(k.(trackerKey).client) {
			return true
		}
		t := v.(*tracker)
		t.mu.Lock()
		t.closed = true
		for key, hs := range t.holds {
			for h := range hs {
				h.clearWatch()
			}
			delete(t.holds, key)
		}
		if t.idle != nil {
			t.idle.Stop()
			t.idle = nil
		}
		c, exited := t.conns, t.exited
		t.conns = nil
		t.mu.Unlock()
		t.poke()
		if exited != nil {
			<-exited
		}
		if c != nil {
			c.close()
		}
		trackers.CompareAndDelete(k, t)
		forgetIdle(t)
		return true
	})
}
