package wait

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
	"github.com/go-redis-lock/redislock/internal/topology"
)

// A lane is one connection's loop of BLPOPs (see the top of this file).
type lane struct {
	rt   *waitRuntime
	wake string // the suffix of its wake keys

	// Guarded by rt.mu:
	reqs    []*Req // waiting on it, in arrival order
	tag     string // on a cluster: the hash tag of its waiters
	running bool   // its goroutine runs
	rounds  uint64 // BLPOPs sent: each has a wake key of its own
	blocked string // the wake key of its BLPOP in flight; "" when none
	woken   bool   // a wake-up is being pushed to that BLPOP
	landed  bool   // and it is in Redis
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
	inline    *Req     // the waiter whose goroutine runs the lane (see serveFor); nil: none
	conn      net.Conn // rc's connection (see connOf)

	rc *redis.Client // the lane's own client, one connection; nil: it sends on rt.rc
}

// cutAfter is how long a lane run in its waiter's goroutine waits, once
// that waiter's context has ended, for the wake-up of its BLPOP to land
// before it cuts the read short (see cut).
const cutAfter = 50 * time.Millisecond

// connOf records the connection of a lane's own client as it is dialled.
type connOf struct{ ln *lane }

func (h connOf) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil {
			h.ln.rt.mu.Lock()
			h.ln.conn = c
			h.ln.rt.mu.Unlock()
		}
		return c, err
	}
}

func (connOf) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (connOf) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// sender is what the lane sends its BLPOPs on.
func (ln *lane) sender() redis.UniversalClient {
	if ln.rc != nil {
		return ln.rc
	}
	return ln.rt.rc
}

// cut ends the round of own, the waiter whose goroutine runs the lane,
// whose context ended: its BLPOP is woken through the wake key (see
// Req.Abandon), and if it is still in flight cutAfter later (Redis does
// not answer), its read is cut short. go-redis then drops the connection,
// and the round ends with the error, as on a connection lost: what it may
// have taken is given back as for one (see the root's abandonWait).
func (ln *lane) cut(own *Req) {
	d := cutAfter
	if t := registry.TuningOf(ln.rt.key.Client).Cut; t > 0 {
		d = t
	}
	time.AfterFunc(d, func() {
		rt := ln.rt
		rt.mu.Lock()
		defer rt.mu.Unlock()
		// Alone in the BLPOP: a cut would fail the others' rounds too.
		if ln.inline == own && own.sent && len(ln.reqs) == 1 && ln.conn != nil {
			_ = ln.conn.SetReadDeadline(time.Now()) // the next read sets its own: see laneOpt
		}
	})
	own.Abandon()
}

// displacedFor is how long a lane whose solo waiter a newcomer woke sends
// its BLPOPs without a try behind them.
const displacedFor = time.Second

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
	ctx, cancel := context.WithTimeout(context.Background(), pushTimeout)
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

// run is the lane's goroutine: one BLPOP after another while waiters are
// assigned to it.
func (ln *lane) run() {
	defer ln.rt.lanes.Done()
	for ln.serve() {
	}
}

// serve runs one BLPOP of the lane and hands its outcomes over. It
// reports false when the lane had no waiter left, and stopped.
func (ln *lane) serve() bool {
	batch, solo, ctl, d := ln.next()
	if batch == nil {
		return false
	}
	pop, try := ln.block(batch, solo, ctl, d)
	var culprits map[string]bool
	if len(batch) > 1 && topology.IsReply(pop.Err()) && !topology.Is(pop.Err()) {
		culprits = ln.culprits(batch)
	}
	ended, stale := ln.finish(solo, ctl, pop, try, culprits)
	if stale {
		ctx, cancel := context.WithTimeout(context.Background(), pushTimeout)
		_ = ln.rt.rc.Del(ctx, ctl).Err()
		cancel()
	}
	for _, e := range ended {
		e.req.res <- e.round
	}
	return true
}

// serveFor runs the lane in the caller's goroutine, instead of a
// goroutine of its own, until own's round ends (see On); then it hands the
// lane to a goroutine if it has other waiters, or stops it.
func (ln *lane) serveFor(own *Req) {
	rt := ln.rt
	rt.mu.Lock()
	ln.inline = own
	rt.mu.Unlock()
	defer func() {
		rt.mu.Lock()
		ln.inline = nil
		rt.mu.Unlock()
	}()
	for len(own.res) == 0 { // own's outcome is read once this returns
		if !ln.serve() {
			rt.lanes.Done()
			return
		}
	}
	rt.mu.Lock()
	if len(ln.reqs) > 0 { // their next round ends them at once when closed
		rt.mu.Unlock()
		go ln.run()
		return
	}
	ln.running = false
	rt.laneStoppedLocked()
	rt.mu.Unlock()
	rt.lanes.Done()
}

// culprits returns the signal keys of batch that are not lists (nor
// missing): those that made a BLPOP of them all fail with an error reply
// (WRONGTYPE). Their waiters are told; the others wait on. Nil when it
// cannot tell: every waiter is told then.
func (ln *lane) culprits(batch []*Req) map[string]bool {
	ctx, cancel := context.WithTimeout(context.Background(), pushTimeout)
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

// An ending is a Req's outcome, handed over once the lane is done
// with its BLPOP.
type ending struct {
	req   *Req
	round Round
}

// next returns the waiters of the lane's next BLPOP (solo: the one whose
// try goes behind it, if any), its wake key and its timeout; a nil batch
// when the lane has no waiter left: it stops then.
func (ln *lane) next() (batch []*Req, solo *Req, ctl string, d time.Duration) {
	rt := ln.rt
	rt.mu.Lock()
	defer rt.mu.Unlock()
	keep := ln.reqs[:0]
	for _, r := range ln.reqs {
		switch {
		case rt.closed:
			r.res <- Round{Err: ErrShutdown, Gone: r.gone.Load()}
		case r.gone.Load():
			r.res <- Round{Gone: true}
		case rt.retired: // its waiter tries, then waits elsewhere
			r.res <- Round{}
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
	batch = append([]*Req(nil), ln.reqs...)
	if len(batch) == 1 && batch[0].try != nil && !rt.sentinel && time.Since(ln.displaced) > displacedFor {
		solo = batch[0]
	}
	ln.rounds++
	ctl = batch[0].signal + ln.wake + ":" + strconv.FormatUint(ln.rounds, 10)
	ln.blocked, ln.woken, ln.landed = ctl, false, false
	return batch, solo, ctl, time.Until(until)
}

// block sends the BLPOP of batch and its wake key ctl for d, with solo's
// try behind it, and waits for the replies.
func (ln *lane) block(batch []*Req, solo *Req, ctl string, d time.Duration) (pop, try *redis.Cmd) {
	d = max(d, MinSlice)
	ctx := context.Background()
	if ln.rc == nil && !ln.rt.readsAlone {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d+pushTimeout)
		defer cancel()
	}
	args := make([]any, 0, len(batch)+3)
	args = append(args, "BLPOP")
	for _, r := range batch {
		args = append(args, r.signal)
	}
	args = append(args, ctl, formatSeconds(d))
	pipe := ln.sender().Pipeline()
	pop = pipe.Do(ctx, args...)
	cmds := []*redis.Cmd{pop}
	if solo != nil {
		try = pipe.Do(ctx, solo.try...)
		cmds = append(cmds, try)
	}
	_, err := pipe.Exec(ctx) // each command's own error is read by finish
	topology.FailedPipeline(err, cmds...)
	return pop, try
}

// finish sorts out the outcome of a BLPOP (pop, with solo's try behind
// it): it ends the waiters it answers (the one whose signal it popped,
// the solo waiter, those that gave up or whose time ran out, or all on an
// error but for an error reply that culprits, when not nil, pins on some
// keys: their waiters only) and keeps the others for the next BLPOP.
// stale reports that a wake-up it did not take is in Redis, for the lane
// to delete.
func (ln *lane) finish(solo *Req, ctl string, pop, try *redis.Cmd, culprits map[string]bool) (ended []ending, stale bool) {
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
		perr = ErrShutdown // not the closed connection's own error: the caller's client is fine
	}
	stale = ln.wakeDoneLocked(key, ctl)
	keep := ln.reqs[:0]
	for _, r := range ln.reqs {
		if !r.sent { // came in during the BLPOP
			keep = append(keep, r)
			continue
		}
		r.sent = false
		out := ln.roundLocked(r, solo, key == ctl, perr, try, culprits)
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

// wakeDoneLocked ends the wake-up of the BLPOP that waited on wake key
// ctl and popped from key: a wake-up it did not take is deleted, here
// (stale: it was in Redis by then) or by push once it is. rt.mu is held.
func (ln *lane) wakeDoneLocked(key, ctl string) (stale bool) {
	if ln.woken && key != ctl {
		if stale = ln.landed; !stale {
			if ln.unclaimed == nil {
				ln.unclaimed = map[string]bool{}
			}
			ln.unclaimed[ctl] = true
		}
	}
	ln.blocked, ln.woken, ln.landed = "", false, false
	return stale
}

// roundLocked is what the BLPOP (woken: by its wake key) came to for r,
// before answers judges it: the BLPOP's error, unless another waiter's key
// failed it (culprits), and for the solo waiter its try. rt.mu is held.
func (ln *lane) roundLocked(r, solo *Req, woken bool, perr error, try *redis.Cmd, culprits map[string]bool) Round {
	out := Round{Gone: r.gone.Load(), Err: perr}
	if culprits != nil && !culprits[r.signal] {
		out.Err = nil // another waiter's key failed the BLPOP
	}
	if r == solo {
		out.Try, out.Woken = try, woken
		if out.Woken && len(ln.reqs) > 1 && !out.Gone { // woken for a newcomer
			ln.displaced = time.Now()
		}
	}
	return out
}

// answers fills in what a BLPOP that popped from key (""; none), or timed
// out (slept), by late, says of r, and reports whether that ends r's
// round: an error (out.Err) ends every round; a pop ends its waiter's, a
// timeout those whose time ran out; the solo waiter's ends with its try,
// and one that gave up ends at once. The others wait on.
func (out *Round) answers(r *Req, key string, slept bool, late time.Time) bool {
	switch {
	case out.Err != nil:
		out.Woken = false
	case key == r.signal:
		out.Popped, out.Woken = true, false
	case out.Try != nil:
		out.Slept = slept
	case out.Gone:
	case slept && !r.until.After(late):
		out.Slept = true
	default:
		return false
	}
	return true
}

// formatSeconds renders d as the float seconds BLPOP takes, rounded up to
// the millisecond and never below MinSlice (go-redis's BLPop helper would
// round it up to whole seconds).
func formatSeconds(d time.Duration) string {
	ms := int64(max(d, MinSlice)+time.Millisecond-1) / int64(time.Millisecond)
	return strconv.FormatInt(ms/1000, 10) + "." + fmt.Sprintf("%03d", ms%1000)
}
