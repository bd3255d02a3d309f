package redislock

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
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

// A lane is one connection's loop of BLPOPs (see the top of this file).
type lane struct {
	rt   *waitRuntime
	wake string // the suffix of its wake keys

	// Guarded by rt.mu:
	reqs    []*waitReq // waiting on it, in arrival order
	tag     string     // on a cluster: the hash tag of its waiters
	running bool       // its goroutine runs
	rounds  uint64     // BLPOPs sent: each has a wake key of its own
	blocked string     // the wake key of its BLPOP in flight; "" when none
	woken   bool       // a wake-up is being pushed to that BLPOP
	landed  bool       // and it is in Redis
	// unclaimed holds the wake keys of BLPOPs that ended without taking
	// the wake-up being pushed to them: its pusher deletes it (see push).
	unclaimed map[string]bool
	// displaced holds when a newcomer last woke this lane's solo waiter
	// (whose try, pipelined behind its BLPOP, ends its round then). For
	// displacedFor after that the lane pipelines no try, even with one
	// waiter: the displaced waiter's next round, coming back here or
	// going to another lane, would otherwise end that lane's solo round
	// in the same way, and so on round the lanes, hundreds of times a
	// second (see TestWaitersBeyondTheLanesDoNotChurn).
	displaced time.Time
}

// displacedFor is how long a lane whose solo waiter a newcomer woke sends
// its BLPOPs without a try behind them.
const displacedFor = time.Second

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
	var shared, solo *lane
	for _, ln := range rt.all {
		switch n := len(ln.reqs); {
		case n == 0 && (!rt.cluster || ln.tag == tag || !ln.running):
			ln.tag = tag
			return ln
		case !rt.share || (rt.cluster && ln.tag != tag):
		case n == 1 && solo == nil:
			solo = ln
		case n > 1 && (shared == nil || n < len(shared.reqs)):
			shared = ln
		}
	}
	switch {
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

// wakeLocked returns the wake key of ln's BLPOP in flight, if it has one
// and it was not woken yet: the caller pushes it (see push).
func (ln *lane) wakeLocked() string {
	if ln.blocked == "" || ln.woken {
		return ""
	}
	ln.woken = true
	return ln.blocked
}

// push wakes the BLPOP that waits on the wake key wake ("": none). Each
// BLPOP has a wake key of its own, never used again, so a wake-up that
// BLPOP did not take (it returned for another reason first) is deleted:
// by the lane, before it hands the BLPOP's outcome over, if the wake-up
// was in Redis by then (landed), or else here, once it is.
func (ln *lane) push(wake string) {
	if wake == "" {
		return
	}
	rt := ln.rt
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	pipe := rt.rc.TxPipeline()
	pipe.LPush(ctx, wake, "1")
	pipe.PExpire(ctx, wake, wakeExpire)
	_, _ = pipe.Exec(ctx)
	rt.mu.Lock()
	orphan := ln.unclaimed[wake]
	if orphan {
		delete(ln.unclaimed, wake)
	} else if ln.blocked == wake {
		ln.landed = true
	}
	rt.mu.Unlock()
	if orphan {
		_ = rt.rc.Del(ctx, wake).Err()
	}
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

// run is the lane's goroutine: one BLPOP after another while waiters are
// assigned to it.
func (ln *lane) run() {
	defer ln.rt.lanes.Done()
	for {
		batch, solo, ctl, d := ln.next()
		if batch == nil {
			return
		}
		pop, try := ln.block(batch, solo, ctl, d)
		var culprits map[string]bool
		if len(batch) > 1 && topology.IsReply(pop.Err()) && !topology.Is(pop.Err()) {
			culprits = ln.culprits(batch)
		}
		ended, stale := ln.finish(solo, ctl, pop, try, culprits)
		if stale {
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			_ = ln.rt.rc.Del(ctx, ctl).Err()
			cancel()
		}
		for _, e := range ended {
			e.req.res <- e.round
		}
	}
}

// culprits returns the signal keys of batch that are not lists (nor
// missing): those that made a BLPOP of them all fail with an error reply
// (WRONGTYPE). Their waiters are told; the others wait on. Nil when it
// cannot tell: every waiter is told then.
func (ln *lane) culprits(batch []*waitReq) map[string]bool {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	pipe := ln.rt.rc.Pipeline()
	types := make([]*redis.StatusCmd, len(batch))
	for i, r := range batch {
		types[i] = pipe.Type(ctx, r.signal)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil
	}
	bad := map[string]bool{}
	for i, r := range batch {
		if t := types[i].Val(); t != "list" && t != "none" {
			bad[r.signal] = true
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return bad
}

// An ending is a waitReq's outcome, handed over once the lane is done
// with its BLPOP.
type ending struct {
	req   *waitReq
	round waitRound
}

// next returns the waiters of the lane's next BLPOP (solo: the one whose
// try goes behind it, if any), its wake key and its timeout; a nil batch
// when the lane has no waiter left, and its goroutine is to exit.
func (ln *lane) next() (batch []*waitReq, solo *waitReq, ctl string, d time.Duration) {
	rt := ln.rt
	rt.mu.Lock()
	defer rt.mu.Unlock()
	keep := ln.reqs[:0]
	for _, r := range ln.reqs {
		switch {
		case rt.closed:
			r.res <- waitRound{err: redis.ErrClosed, gone: r.gone.Load()}
		case r.gone.Load():
			r.res <- waitRound{gone: true}
		default:
			keep = append(keep, r)
		}
	}
	clear(ln.reqs[len(keep):])
	ln.reqs = keep
	if len(ln.reqs) == 0 {
		ln.running = false
		rt.laneStoppedLocked()
		return nil, nil, "", 0
	}
	until := ln.reqs[0].until
	for _, r := range ln.reqs {
		r.sent = true
		until = minTime(until, r.until)
	}
	batch = append([]*waitReq(nil), ln.reqs...)
	if len(batch) == 1 && batch[0].try != nil && time.Since(ln.displaced) > displacedFor {
		solo = batch[0]
	}
	ln.rounds++
	ctl = batch[0].signal + ln.wake + ":" + strconv.FormatUint(ln.rounds, 10)
	ln.blocked, ln.woken, ln.landed = ctl, false, false
	return batch, solo, ctl, time.Until(until)
}

// block sends the BLPOP of batch and its wake key ctl for d, with solo's
// try behind it, and waits for the replies.
func (ln *lane) block(batch []*waitReq, solo *waitReq, ctl string, d time.Duration) (pop, try *redis.Cmd) {
	d = max(d, minSlice)
	ctx, cancel := context.WithTimeout(context.Background(), d+cleanupTimeout)
	defer cancel()
	args := make([]any, 0, len(batch)+3)
	args = append(args, "BLPOP")
	for _, r := range batch {
		args = append(args, r.signal)
	}
	args = append(args, ctl, formatSeconds(d))
	pipe := ln.rt.rc.Pipeline()
	pop = pipe.Do(ctx, args...)
	cmds := []*redis.Cmd{pop}
	if solo != nil {
		try = pipe.Do(ctx, solo.try...)
		cmds = append(cmds, try)
	}
	_, err := pipe.Exec(ctx) // each command's own error is read by finish
	failedPipeline(err, cmds...)
	return pop, try
}

// finish sorts out the outcome of a BLPOP (pop, with solo's try behind
// it): it ends the waiters it answers (the one whose signal it popped,
// the solo waiter, those that gave up or whose time ran out, or all on an
// error but for an error reply that culprits, when not nil, pins on some
// keys: their waiters only) and keeps the others for the next BLPOP.
// stale reports that a wake-up it did not take is in Redis, for the lane
// to delete.
func (ln *lane) finish(solo *waitReq, ctl string, pop, try *redis.Cmd, culprits map[string]bool) (ended []ending, stale bool) {
	key := ""
	if kv, err := pop.StringSlice(); err == nil && len(kv) == 2 {
		key = kv[0]
	}
	perr := pop.Err()
	slept := errors.Is(perr, redis.Nil)
	if slept {
		perr = nil
	}
	late := time.Now().Add(time.Millisecond)
	rt := ln.rt
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if perr != nil && rt.closed {
		perr = redis.ErrClosed // not the closed connection's own error: the caller's client is fine
	}
	if ln.woken && key != ctl {
		if stale = ln.landed; !stale {
			if ln.unclaimed == nil {
				ln.unclaimed = map[string]bool{}
			}
			ln.unclaimed[ctl] = true
		}
	}
	ln.blocked, ln.woken, ln.landed = "", false, false
	keep := ln.reqs[:0]
	for _, r := range ln.reqs {
		if !r.sent { // came in during the BLPOP
			keep = append(keep, r)
			continue
		}
		r.sent = false
		out := waitRound{gone: r.gone.Load(), err: perr}
		if culprits != nil && !culprits[r.signal] {
			out.err = nil // another waiter's key failed the BLPOP
		}
		if r == solo {
			out.try, out.woken = try, key == ctl
			if out.woken && len(ln.reqs) > 1 && !out.gone { // woken for a newcomer
				ln.displaced = time.Now()
			}
		}
		if !out.answers(r, key, slept, late) {
			keep = append(keep, r)
			continue
		}
		ended = append(ended, ending{r, out})
	}
	clear(ln.reqs[len(keep):])
	ln.reqs = keep
	return ended, stale
}

// answers fills in what a BLPOP that popped from key (""; none), or timed
// out (slept), by late, says of r, and reports whether that ends r's
// round: an error (out.err) ends every round; a pop ends its waiter's, a
// timeout those whose time ran out; the solo waiter's ends with its try,
// and one that gave up ends at once. The others wait on.
func (out *waitRound) answers(r *waitReq, key string, slept bool, late time.Time) bool {
	switch {
	case out.err != nil:
		out.woken = false
	case key == r.signal:
		out.popped, out.woken = true, false
	case out.try != nil:
		out.slept = slept
	case out.gone:
	case slept && !r.until.After(late):
		out.slept = true
	default:
		return false
	}
	return true
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
