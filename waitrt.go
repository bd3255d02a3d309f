package redislock

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/watch"
)

// Waiting on connections of the library's own.
//
// A BLPOP holds its connection for a whole slice. Sent through the user's
// client it would hold a connection of the user's pool, and that client's
// other commands (a holder's renewals and releases) would queue behind it.
// So waits run on a wait runtime: per user client and node, a go-redis
// client of the library's own, made from the options of the user's client
// (address, dialer, TLS, credentials, database, protocol, OnConnect; not
// its hooks, which go-redis keeps per client), whose connections only ever
// carry waits and the wake-ups of waits.
//
// A lane is one connection's loop: it sends one BLPOP on the signal lists
// of every waiter assigned to it and on a wake key of its own. A waiter
// alone on its lane has its next try pipelined behind the BLPOP, so a
// hand-off takes one round trip; a waiter that shares a lane tries after
// its BLPOP returns, one round trip more. A new waiter takes an idle lane,
// else a new one up to maxLanes, else shares the lane with the fewest
// waiters; a lane blocked in BLPOP is woken through its wake key to take a
// new waiter in, or to let one that gave up out. On a cluster, keys of two
// slots cannot share a BLPOP (CROSSSLOT): there a lane only takes waiters
// of one hash tag, and lanes are not capped (one per name with waiters at
// most, on the node that serves it).
//
// A runtime closes its connections runtimeIdle after its last wait ended;
// Shutdown closes every runtime at once.

const (
	// maxLanes is how many connections a runtime of a single node (or a
	// Sentinel-managed master) waits on at most: more waiters share them.
	maxLanes = 8

	// clusterLanesPool caps the connections of a cluster node's runtime
	// (one per name with waiters); a wait beyond it queues in go-redis.
	clusterLanesPool = 1024
)

// runtimeIdle is how long a runtime keeps its connections after its last
// wait ended: 30 s (settable by tests only, while other tests run).
var runtimeIdle = func() *atomic.Int64 {
	var d atomic.Int64
	d.Store(int64(30 * time.Second))
	return &d
}()

// runtimes holds one wait runtime per (user client, node): the package's
// registry of the connections and goroutines it adds to a client.
var runtimes sync.Map // runtimeKey -> *waitRuntime

type runtimeKey struct {
	client redis.UniversalClient
	addr   string // the node's, on a cluster; "" otherwise
}

// errRuntimeClosed is what enqueue says of a runtime that was closed
// (idle, or Shutdown) after the waiter found it: take a new one.
var errRuntimeClosed = errors.New("redislock: wait runtime closed")

// A waitRuntime runs the waits of one user client on one node.
type waitRuntime struct {
	key     runtimeKey
	rc      redis.UniversalClient // what waits are sent on
	own     *redis.Client         // rc, when it is the runtime's own; nil: the user's client (see runtimeFor)
	share   bool                  // several waiters may share a lane
	cluster bool                  // lanes share by hash tag and are not capped
	lanes   sync.WaitGroup        // lane goroutines running

	// mu guards the fields below and those of every lane and waitReq of
	// the runtime that say so. It is never held while sending.
	mu      sync.Mutex
	all     []*lane
	running int // lanes whose goroutine runs
	closed  bool
	idle    *time.Timer  // winds the runtime down after runtimeIdle
	hooks   []redis.Hook // added to own (tests' seam, see AddWaitHook)
}

// runtimeFor returns the wait runtime of client for key: on a cluster,
// that of the node serving key.
//
// A client that is neither a *redis.ClusterClient nor has a *redis.Options
// (a wrapper of the caller's) cannot be copied: its waits go through it,
// one lane each, as they would without a runtime.
func runtimeFor(ctx context.Context, client redis.UniversalClient, key string) (*waitRuntime, error) {
	k := runtimeKey{client: client}
	var opt redis.Options
	cluster := false
	switch c := client.(type) {
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		opt, cluster = *node.Options(), true
		k.addr = opt.Addr
	case interface{ Options() *redis.Options }:
		opt = *c.Options()
	default:
		if !reflect.TypeOf(client).Comparable() {
			return &waitRuntime{rc: client}, nil // not kept: a key of the registry must be comparable
		}
	}
	if v, ok := runtimes.Load(k); ok {
		return v.(*waitRuntime), nil
	}
	rt := &waitRuntime{key: k, rc: client, cluster: cluster}
	if opt.Addr != "" || opt.Dialer != nil {
		ownPool(&opt, cluster)
		rt.own = redis.NewClient(&opt)
		rt.rc, rt.share = rt.own, true
	}
	v, loaded := runtimes.LoadOrStore(k, rt)
	if loaded && rt.own != nil {
		_ = rt.own.Close()
	}
	return v.(*waitRuntime), nil
}

// ownPool sets the pool options of a runtime's own client, whatever the
// caller's client says of its own pool: a lane each and a spare for the
// wake-ups (a cluster node: up to clusterLanesPool), no connection kept
// idle or capped otherwise (MaxIdleConns; MaxActiveConns, in go-redis
// releases that have it), and no retry: a BLPOP whose reply was lost may
// have popped a signal, and a second would pop another waiter's (the
// waiter hears of the error and tries on the caller's client instead).
func ownPool(opt *redis.Options, cluster bool) {
	opt.PoolSize, opt.MinIdleConns, opt.MaxIdleConns = maxLanes+2, 0, 0
	if cluster {
		opt.PoolSize = clusterLanesPool
	}
	opt.MaxRetries = -1
	if f := reflect.ValueOf(opt).Elem().FieldByName("MaxActiveConns"); f.IsValid() && f.CanSet() && f.Kind() == reflect.Int {
		f.SetInt(0)
	}
}

// A waitReq is one waiter's round: a BLPOP on signal until until, with try
// pipelined behind it when the waiter is alone on its lane.
type waitReq struct {
	signal string
	until  time.Time
	try    []any          // nil: never pipelined (replica ack)
	res    chan waitRound // its outcome; one slot

	// rt is where it waits (nil before enqueue), gone whether its waiter
	// gave up (see abandon). enqueue sets rt before it reads gone, and
	// abandon sets gone before it reads rt, so one of them sees the other.
	rt   atomic.Pointer[waitRuntime]
	gone atomic.Bool

	// Guarded by rt.mu:
	lane *lane
	sent bool // in the BLPOP in flight
}

// waitRound is the outcome of a waitReq.
type waitRound struct {
	popped bool       // the BLPOP took a signal from req.signal
	woken  bool       // it was woken through its lane's wake key
	slept  bool       // it ran out its time (a nil reply)
	gone   bool       // the waiter gave up before it ended
	try    *redis.Cmd // the pipelined try; nil when none was sent
	err    error      // the BLPOP's error, other than a nil reply
}

// newWaitReq returns a round of waiting on signal for d.
func newWaitReq(signal string, d time.Duration, try []any) *waitReq {
	return &waitReq{signal: signal, until: time.Now().Add(max(d, minSlice)), try: try, res: make(chan waitRound, 1)}
}

// waitOn runs req on the runtime of client for key and returns its outcome.
// It returns early only when the runtime cannot be had (a cluster whose
// slot map cannot be loaded).
func waitOn(ctx context.Context, client redis.UniversalClient, req *waitReq) (waitRound, error) {
	for {
		rt, err := runtimeFor(ctx, client, req.signal)
		if err != nil {
			return waitRound{}, err
		}
		if err := rt.enqueue(req); errors.Is(err, errRuntimeClosed) {
			continue
		}
		return <-req.res, nil
	}
}

// enqueue assigns req to a lane, starting the lane's goroutine or waking
// its BLPOP so that it takes req in.
func (rt *waitRuntime) enqueue(req *waitReq) error {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return errRuntimeClosed
	}
	req.rt.Store(rt)
	if req.gone.Load() { // given up before it found its lane
		rt.mu.Unlock()
		req.res <- waitRound{gone: true}
		return nil
	}
	ln := rt.pickLocked(req)
	req.lane = ln
	ln.reqs = append(ln.reqs, req)
	start := !ln.running
	if start {
		ln.running = true
		rt.running++
		rt.lanes.Add(1)
		if rt.idle != nil {
			rt.idle.Stop()
			rt.idle = nil
		}
	}
	wake := ln.wakeLocked()
	rt.mu.Unlock()
	if start {
		go ln.run()
	}
	ln.push(wake)
	return nil
}

// pickLocked returns the lane req is to wait on: an idle lane; else a new
// one, up to maxLanes; else the shared lane with the fewest waiters, so
// that a lane whose waiter has its try pipelined behind its BLPOP is
// interrupted only when no lane is shared yet (that try runs when its
// BLPOP is woken: see lane.displaced). On a cluster, a lane only takes
// waiters of one hash tag, and lanes are not capped.
func (rt *waitRuntime) pickLocked(req *waitReq) *lane {
	tag := hashTag(req.signal)
	idle, shared, solo := rt.scanLocked(tag)
	switch {
	case idle != nil:
		idle.tag = tag
		return idle
	case rt.cluster && shared != nil:
		return shared
	case rt.cluster && solo != nil:
		return solo
	case !rt.share || rt.cluster || len(rt.all) < maxLanes:
		ln := &lane{rt: rt, wake: ":wake:" + uuid.NewString(), tag: tag}
		rt.all = append(rt.all, ln)
		return ln
	case shared != nil:
		return shared
	}
	return solo
}

// scanLocked looks at the lanes for a waiter on hash tag tag: the first
// idle one it may take (on a cluster, one of its tag or stopped), else the
// ones it may share: the least busy of those with several waiters, and the
// first with one. rt.mu is held.
func (rt *waitRuntime) scanLocked(tag string) (idle, shared, solo *lane) {
	for _, ln := range rt.all {
		switch n := len(ln.reqs); {
		case n == 0 && (!rt.cluster || ln.tag == tag || !ln.running):
			return ln, nil, nil
		case !rt.share || (rt.cluster && ln.tag != tag):
		case n == 1 && solo == nil:
			solo = ln
		case n > 1 && (shared == nil || n < len(shared.reqs)):
			shared = ln
		}
	}
	return nil, shared, solo
}

// abandon tells req's lane that its waiter gave up: a BLPOP that waits
// for it is woken, and req ends with what that BLPOP came to (a signal it
// popped must be given back); a req not sent yet ends at once.
func (req *waitReq) abandon() {
	req.gone.Store(true)
	rt := req.rt.Load()
	if rt == nil {
		return // enqueue ends it
	}
	rt.mu.Lock()
	ln, wake := req.lane, ""
	if req.sent {
		wake = ln.wakeLocked()
	}
	rt.mu.Unlock()
	if ln != nil {
		ln.push(wake)
	}
}

// laneStoppedLocked counts a lane's goroutine out; with none left the
// runtime winds down after runtimeIdle.
func (rt *waitRuntime) laneStoppedLocked() {
	rt.running--
	if rt.running > 0 || rt.closed || rt.own == nil || len(rt.hooks) > 0 {
		return
	}
	rt.idle = time.AfterFunc(time.Duration(runtimeIdle.Load()), rt.windDown)
}

// windDown closes a runtime that has been idle for runtimeIdle. It is
// marked closed under the same lock as the check that it is idle, so that
// a waiter that comes meanwhile takes a new runtime.
func (rt *waitRuntime) windDown() {
	rt.mu.Lock()
	if rt.running > 0 || rt.closed || rt.idle == nil {
		rt.mu.Unlock()
		return
	}
	rt.closed, rt.idle = true, nil
	rt.mu.Unlock()
	rt.shut()
}

// close stops the runtime: its BLPOPs in flight fail (their waiters get
// redis.ErrClosed), its lanes' goroutines are waited for and its
// connections closed. A waiter that comes later takes a new runtime.
func (rt *waitRuntime) close() {
	rt.mu.Lock()
	rt.closed = true
	if rt.idle != nil {
		rt.idle.Stop()
		rt.idle = nil
	}
	rt.mu.Unlock()
	rt.shut()
}

// shut does the work of close, once the runtime is marked closed.
func (rt *waitRuntime) shut() {
	runtimes.CompareAndDelete(rt.key, rt)
	if rt.own != nil {
		_ = rt.own.Close() // a BLPOP in flight fails at once
	}
	rt.lanes.Wait()
}

// Shutdown stops the connections and goroutines this package runs beside
// the given clients (all clients when none is given), and waits for them:
// the wait runtimes (the connections that blocking acquires wait on) and
// the key trackers (see WithTracking). An Acquire waiting in Redis at that
// moment returns an error matching redis.ErrClosed; holds that were
// watched are no longer watched (renewal and the local deadline still end
// them in time). Anything used later starts them again.
//
// They also stop by themselves: a client's wait connections are closed 30
// seconds after its last wait ended, and its trackers 30 seconds after
// their last hold ended. Call Shutdown when a process is about to exit
// with holds or waits still live, or in a test before looking for leaked
// goroutines (go.uber.org/goleak); redislocktest's clients call it for
// themselves when their test ends.
func Shutdown(clients ...redis.UniversalClient) {
	ours := func(c redis.UniversalClient) bool {
		return len(clients) == 0 || slices.ContainsFunc(clients, func(x redis.UniversalClient) bool { return sameClient(x, c) })
	}
	runtimes.Range(func(k, v any) bool {
		if ours(k.(runtimeKey).client) {
			v.(*waitRuntime).close()
		}
		return true
	})
	watch.Close(ours)
}

// sameClient reports whether a and b are the same client, without
// comparing values whose type is not comparable.
func sameClient(a, b redis.UniversalClient) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// hashTag returns the hash tag of key (what Redis Cluster hashes: between
// the first '{' and the next '}', when not empty), or key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
