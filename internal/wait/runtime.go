package wait

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
	"github.com/go-redis-lock/redislock/internal/topology"
)

// wakeExpire bounds how long a wake element outlives the BLPOP it was
// pushed for, when that BLPOP returned for another reason first.
const wakeExpire = 5 * time.Second

// pushTimeout bounds a wake-up's push, and the deletion of one no BLPOP
// took.
const pushTimeout = 2 * time.Second

const (
	// MinSlice is the shortest BLPOP sent. Never 0, which Redis reads as
	// "block forever" and for which go-redis sets no read deadline; and not
	// 1 ms either: Redis before 7.0.8 truncated float timeouts to whole
	// milliseconds after a long-double multiply, which turns "0.001" into
	// 0 (redis#11687), and a waiter would block forever. "0.002" cannot
	// truncate below 1 ms.
	MinSlice = 2 * time.Millisecond
	// maxLanes is how many connections a runtime of a single node (or a
	// Sentinel-managed master) waits on at most: more waiters share them.
	maxLanes = 8

	// clusterLanesPool caps the connections of a cluster node's runtime
	// (one per name with waiters); a wait beyond it queues in go-redis.
	clusterLanesPool = 1024
)

// runtimeIdle is how long a runtime keeps its connections after its last
// wait ended (a test may tune it per client: registry.Tuning).
const runtimeIdle = 30 * time.Second

// ErrShutdown ends a wait in Redis when its runtime is closed (the root's
// Shutdown): it matches redis.ErrClosed, and says that the user's client
// itself is open.
var ErrShutdown = fmt.Errorf("redislock: waiting shut down by Shutdown (the client is open): %w", redis.ErrClosed)

// errRuntimeClosed is what enqueue says of a runtime that was closed
// (idle, or Close) after the waiter found it: take a new one.
var errRuntimeClosed = errors.New("redislock: wait runtime closed")

// A waitRuntime runs the waits of one user client on one node.
type waitRuntime struct {
	key     registry.Key          // in the registry: one runtime per (user client, node)
	rc      redis.UniversalClient // what waits are sent on
	own     *redis.Client         // rc, when it is the runtime's own; nil: the user's client (see runtimeFor)
	share   bool                  // several waiters may share a lane
	cluster bool                  // lanes share by hash tag and are not capped
	// readsAlone: rc is own, which sets its read deadlines from its
	// command timeouts alone (no ContextTimeoutEnabled), so a BLPOP is
	// sent without a context deadline: it would change nothing, and cost
	// a timer for every round. Lanes' own clients always read alone.
	readsAlone bool
	// laneOpt, when not nil, is what each lane's own client is made from
	// (see lane.rc): a connection of its own, whose read a lane run in
	// its caller's goroutine can cut short (see lane.cut). Nil on a
	// cluster and on the user's client: lanes send on rc.
	laneOpt *redis.Options
	// sentinel: the user's client is go-redis's Sentinel failover
	// client. After a failover the runtime's connections stay on the old
	// master until the Sentinels reconfigure it (seconds later), where
	// nobody releases any more. So no try is pipelined behind a BLPOP (it
	// could take a lock on a server whose writes are about to be thrown
	// away): tries go through the user's client, which go-redis moves to
	// the new master as the Sentinels announce it. And while waits run,
	// checkMaster asks the Sentinels every masterCheckEvery whether the
	// runtime's server is still the master; once it is not, the runtime
	// retires.
	sentinel  bool
	pin       *topology.Pin  // where own's connections went (sentinel only)
	quit      chan struct{}  // closed by stopCheck (shut): checkMaster returns
	stopCheck func()         // closes quit once; nil without checkMaster
	lanes     sync.WaitGroup // lane goroutines running, and checkMaster

	// mu guards the fields below and those of every lane and Req of
	// the runtime that say so. It is never held while sending.
	mu      sync.Mutex
	all     []*lane
	running int // lanes whose goroutine runs
	closed  bool
	retired bool         // out of the registry: no new waiter; its waiters start again elsewhere (see retire)
	idle    *time.Timer  // winds the runtime down after runtimeIdle (see laneStoppedLocked)
	stopped time.Time    // when its last lane stopped
	hooks   []redis.Hook // added to own (tests' seam, see AddHook)
}

// runtimeFor returns the wait runtime of client for key: on a cluster,
// that of the node serving key.
//
// A client that is neither a *redis.ClusterClient nor has a *redis.Options
// (a wrapper of the caller's) cannot be copied: its waits go through it,
// one lane each, as they would without a runtime.
func runtimeFor(ctx context.Context, client redis.UniversalClient, key string) (*waitRuntime, error) {
	k := registry.Key{Kind: registry.Runtime, Client: client}
	var opt redis.Options
	cluster := false
	switch c := client.(type) {
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		opt, cluster = *node.Options(), true
		k.Sub = opt.Addr
	case interface{ Options() *redis.Options }:
		opt = *c.Options()
	default:
		if !registry.Keyable(client) {
			return &waitRuntime{rc: client}, nil // not kept: a key of the registry must be comparable
		}
	}
	if v, ok := registry.Load(k); ok {
		return v.(*waitRuntime), nil
	}
	rt := &waitRuntime{key: k, rc: client, cluster: cluster, sentinel: opt.Addr == topology.FailoverAddr}
	if opt.Addr != "" || opt.Dialer != nil {
		rt.ownClients(opt)
	}
	check := rt.sentinel && rt.own != nil
	if check {
		rt.quit = make(chan struct{})
		rt.stopCheck = sync.OnceFunc(func() { close(rt.quit) })
		rt.lanes.Add(1)
	}
	v, loaded := registry.LoadOrStore(k, rt)
	switch {
	case loaded && rt.own != nil:
		_ = rt.own.Close()
	case check:
		go rt.checkMaster()
	}
	return v.(*waitRuntime), nil
}

// ownClients makes rt's own client from opt, the options of the user's
// client, and the options of its lanes' clients where they have their own
// (see laneOpt).
func (rt *waitRuntime) ownClients(opt redis.Options) {
	ownPool(&opt, rt.cluster)
	if rt.sentinel {
		rt.pin = topology.NewPin(&opt)
	}
	// go-redis sets every read's deadline (ReadTimeout >= 0): a cut one
	// is not left behind for the next read.
	if !rt.cluster && opt.ReadTimeout >= 0 && registry.TuningOf(rt.key.Client).Cut >= 0 {
		lo := opt // before NewClient, which fills in opt's defaults (MaxRetries -1 becomes 0: 3 for a second NewClient)
		lo.PoolSize = 1
		// Read deadlines from ReadTimeout alone, which slices stay well
		// within (see the root's maxSliceFor): no context timer per round.
		lo.ContextTimeoutEnabled = false
		rt.laneOpt = &lo
	}
	rt.own = redis.NewClient(&opt)
	rt.rc, rt.share, rt.readsAlone = rt.own, true, !opt.ContextTimeoutEnabled
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

// A Req is one waiter's round: a BLPOP on signal until until, with try
// pipelined behind it when the waiter is alone on its lane.
type Req struct {
	signal string
	until  time.Time
	try    []any      // nil: never pipelined (replica ack)
	res    chan Round // its outcome; one slot

	// rt is where it waits (nil before enqueue), gone whether its waiter
	// gave up (see abandon). enqueue sets rt before it reads gone, and
	// abandon sets gone before it reads rt, so one of them sees the other.
	rt   atomic.Pointer[waitRuntime]
	gone atomic.Bool

	// Guarded by rt.mu:
	lane *lane
	sent bool // in the BLPOP in flight
}

// Round is the outcome of a Req.
type Round struct {
	Popped bool       // the BLPOP took a signal from the Req's signal key
	Woken  bool       // it was woken through its lane's wake key
	Slept  bool       // it ran out its time (a nil reply)
	Gone   bool       // the waiter gave up before it ended
	Try    *redis.Cmd // the pipelined try; nil when none was sent
	Err    error      // the BLPOP's error, other than a nil reply
}

// NewReq returns a round of waiting on signal for d.
func NewReq(signal string, d time.Duration, try []any) *Req {
	return &Req{signal: signal, until: time.Now().Add(max(d, MinSlice)), try: try, res: make(chan Round, 1)}
}

// On runs req on the runtime of client for key and returns its outcome
// (see Run). It returns early only when the runtime cannot be had (a
// cluster whose slot map cannot be loaded).
func On(ctx context.Context, client redis.UniversalClient, req *Req) (Round, error) {
	if _, err := Run(ctx, client, req); err != nil {
		return Round{}, err
	}
	return <-req.res, nil
}

// Run hands req to a lane of the runtime of client for key; its outcome
// comes on req.Result. When req starts a lane, the lane runs in the
// caller's goroutine until req's round ends, and Run reports true (ran):
// the outcome is there when it returns, and no goroutine stood between the
// BLPOP's reply and the caller. If ctx ends first, the BLPOP is woken
// through its wake key (see Req.Abandon) and, should that not land within
// cutAfter, its read is cut short (see lane.cut): Run returns soon after
// ctx ends even when Redis does not answer. A lane that cannot be cut (on
// a cluster) runs in a goroutine of its own for a ctx that can end.
func Run(ctx context.Context, client redis.UniversalClient, req *Req) (ran bool, err error) {
	for {
		rt, err := runtimeFor(ctx, client, req.signal)
		if err != nil {
			return false, err
		}
		ln, err := rt.enqueue(req, ctx.Done() == nil || rt.laneOpt != nil)
		if errors.Is(err, errRuntimeClosed) {
			continue
		}
		if ln == nil {
			return false, nil
		}
		stop := context.AfterFunc(ctx, func() { ln.cut(req) })
		ln.serveFor(req)
		stop()
		return true, nil
	}
}

// Result delivers the outcome of a Req that Start handed to a lane, once.
func (r *Req) Result() <-chan Round { return r.res }

// Own returns what client's waits on key run on: the connections of its
// runtime, which outlive client (see the root's undoOnRuntime), or client
// itself for a client type without options.
func Own(ctx context.Context, client redis.UniversalClient, key string) (redis.Scripter, error) {
	rt, err := runtimeFor(ctx, client, key)
	if err != nil {
		return nil, err
	}
	return rt.rc, nil
}

// enqueue assigns req to a lane, starting the lane's goroutine or waking
// its BLPOP so that it takes req in.
func (rt *waitRuntime) enqueue(req *Req, inline bool) (*lane, error) {
	rt.mu.Lock()
	if rt.closed || rt.retired {
		rt.mu.Unlock()
		return nil, errRuntimeClosed
	}
	req.rt.Store(rt)
	if req.gone.Load() { // given up before it found its lane
		rt.mu.Unlock()
		req.res <- Round{Gone: true}
		return nil, nil
	}
	ln := rt.pickLocked(req)
	req.lane = ln
	ln.reqs = append(ln.reqs, req)
	start := !ln.running
	if start {
		ln.running = true
		rt.running++
		rt.lanes.Add(1)
	}
	wake := ln.wakeLocked()
	rt.mu.Unlock()
	ln.push(wake)
	if start && inline {
		return ln, nil
	}
	if start {
		go ln.run()
	}
	return nil, nil
}

// pickLocked returns the lane req is to wait on: an idle lane; else a new
// one, up to maxLanes; else the shared lane with the fewest waiters, so
// that a lane whose waiter has its try pipelined behind its BLPOP is
// interrupted only when no lane is shared yet (that try runs when its
// BLPOP is woken: see lane.displaced). On a cluster, a lane only takes
// waiters of one hash tag, and lanes are not capped.
func (rt *waitRuntime) pickLocked(req *Req) *lane {
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
		if rt.laneOpt != nil {
			lo := *rt.laneOpt // a copy each: go-redis keeps, and fills in, the options it is given
			ln.rc = redis.NewClient(&lo)
			ln.rc.AddHook(connOf{ln})
			for _, h := range rt.hooks {
				ln.rc.AddHook(h)
			}
		}
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

// Abandon tells req's lane that its waiter gave up: a BLPOP that waits
// for it is woken, and req ends with what that BLPOP came to (a signal it
// popped must be given back); a req not sent yet ends at once.
func (req *Req) Abandon() {
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
