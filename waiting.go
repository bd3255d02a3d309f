package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/wait"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// waitAndTry waits in BLPOP on the signal list for d, on a connection of
// the client's wait runtime (see internal/wait), and tries again: in the same
// pipeline when the waiter has its lane to itself, else right after. It
// returns the outcome, or as soon as ctx ends, whichever comes first.
//
// go-redis cannot abort a read in progress: a cancellation without a
// deadline, and any deadline without ContextTimeoutEnabled, would only be
// seen when the BLPOP returns. So the wait runs on a context of its own,
// and when ctx ends first (or as it answers) waitAndTry returns at once
// with ctx's error while the wait is finished off in the background (see
// abandonWait): its BLPOP is woken through its lane's wake key, a signal
// it popped is given back and a lock its try took is released. The next
// Acquire or Release of the primitive waits for that.
func (l *core) waitAndTry(ctx context.Context, d time.Duration, tk *wait.Ticket) waitResult {
	in := l.ident.Load()
	req := wait.NewReq(l.keys[1], d, l.wokenTry(in, tk))
	if ctx.Done() == nil { // cannot end: no need to watch it
		return l.pipeWait(ctx, req, in, tk)
	}
	ran, err := wait.Run(ctx, l.client, req)
	if err != nil {
		return waitResult{err: err}
	}
	// The wait and the try after it get all the time the caller gives
	// (a try after a lost connection is retried as the client is told),
	// and, once the caller gives up, the cleanup's time to be heard. The
	// round's outcome is read here when it comes first and needs no more
	// from Redis (its pipelined try answered), as most do: then nothing
	// is left to the background.
	round, arrived := firstRound(ctx, ran, req)
	if arrived && ctx.Err() == nil && settled(round) {
		return l.afterWait(ctx, round, in, tk)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ch := make(chan waitResult, 1)
	go func() {
		defer cancel()
		r := round
		if !arrived {
			r = <-req.Result()
		}
		ch <- l.afterWait(pctx, r, in, tk)
	}()
	// Whether Redis answered the wait as ctx ended. A round that ended
	// unanswered (its read cut short: see wait.Run) says nothing of Redis
	// being there.
	heard := arrived && (round.Err == nil || !unanswered(round.Err))
	select {
	case r := <-ch:
		if ctx.Err() == nil {
			return r
		}
		// It ended as ctx did: ctx wins, so that nothing is taken after
		// the caller gave up (a process told to stop, say).
		heard = heard || r.err == nil || !unanswered(r.err)
		done := make(chan waitResult, 1)
		done <- r
		ch = done
	case <-ctx.Done():
	}
	return l.giveUp(ctx, req, ch, cancel, tk, heard)
}

// wokenTry is the try to pipeline behind the BLPOP of a waiter with
// identity in, if any.
func (l *core) wokenTry(in *identity, tk *wait.Ticket) []any {
	switch {
	case in.wokenSet != nil:
		return in.wokenSet
	case !l.ack.on(): // WAIT must follow the try on its connection: see pipeWait
		try, _ := l.prepared(in, tryWoken, tk)
		return try
	}
	return nil
}

// giveUp ends a wait whose caller's ctx ended: the wait (its outcome to
// come on ch) is finished off in the background, and the caller told
// ErrLocked's ctx error, or the outage when Redis, not heard from as ctx
// ended (heard false), does not answer a read either.
func (l *core) giveUp(ctx context.Context, req *wait.Req, ch <-chan waitResult, cancel context.CancelFunc, tk *wait.Ticket, heard bool) waitResult {
	l.cleanups.Add()
	l.abandons.Add()
	if tk != nil {
		tk.Queue().Abandons.Add()
	}
	go l.abandonWait(context.WithoutCancel(ctx), req, ch, cancel, tk)
	// Given up while the lock was busy when last heard: if Redis still
	// answers, that is what the caller is told (ErrLocked); if it does not
	// answer a read within the client's read timeout, the outage is
	// (ErrUnreachable).
	if !heard && !l.answers(ctx) {
		return waitResult{err: l.silent(ctx)}
	}
	return waitResult{err: ctx.Err()}
}

// probeWaitFor is how long a probe (see answers) waits on a client with
// read timeout rt: rt, the time after which go-redis itself calls a
// command unanswered, or go-redis's default when rt is none.
func probeWaitFor(rt time.Duration) time.Duration {
	if rt <= 0 {
		return 3 * time.Second
	}
	return rt
}

// silent is the error of an acquire given up while Redis was busy when
// last heard, and then did not answer a probe.
func (l *core) silent(ctx context.Context) error {
	return fmt.Errorf("%w: %w (given up while the lock was held, and Redis then did not answer a read within %v)", ErrUnreachable, ctx.Err(), l.probeWait)
}

// answers reports whether Redis answers a read of the lock's key, on the
// user's client, within probeWait.
func (l *core) answers(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.probeWait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.client.Exists(pctx, l.keys[0]).Err() }()
	select {
	case err := <-done:
		return err == nil
	case <-pctx.Done():
		return false
	}
}

// firstRound returns req's round, when it is in (arrived) before ctx
// ends: at once when its lane ran in the caller's goroutine (ran).
func firstRound(ctx context.Context, ran bool, req *wait.Req) (round wait.Round, arrived bool) {
	if ran { // the round is over
		return <-req.Result(), true
	}
	select {
	case round = <-req.Result():
		return round, true
	case <-ctx.Done():
		return round, false
	}
}

// waitResult is what one wait and the try after it came to.
type waitResult struct {
	res    acquireResult
	popped bool // the BLPOP took a wake-up signal
	woken  bool // the BLPOP was woken through its lane's wake key
	slept  bool // the BLPOP ran out its slice (a nil reply)
	moving bool // the BLPOP got a topology reply (see topology.Do): it did not block
	err    error
}

// abandonWait finishes a wait whose caller has gone (see waitAndTry): it
// wakes the BLPOP still blocked, waits for the outcome and undoes it. A
// try still unanswered after cleanupTimeout is cancelled (stop).
func (l *core) abandonWait(ctx context.Context, req *wait.Req, ch <-chan waitResult, stop context.CancelFunc, tk *wait.Ticket) {
	defer l.cleanups.Done()
	defer l.abandons.Done()
	if tk != nil {
		defer tk.Queue().Abandons.Done()
	}
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	var r waitResult
	select {
	case r = <-ch: // answered already: nothing to wake
	default:
		req.Abandon()
		select {
		case r = <-ch:
		case <-ctx.Done():
			stop()
			r = <-ch // bounded: a lane's round is, and the try sees stop
		}
	}
	switch {
	case r.err == nil && r.res.status == wire.Acquired:
		// The try took the lock after the caller left: release it,
		// which also wakes the next waiter.
		_, _, unanswered, err := l.sendRelease(ctx, r.res.id)
		err = l.onRuntimeIfClosed(ctx, err, func(via redis.Scripter) error {
			return l.scripts.release.Run(ctx, via, l.keys, r.res.id, l.signalExpireMS, l.turnMS).Err()
		})
		l.afterRelease(r.res.id, unanswered, err)
		if r.popped {
			l.reg.passOn(ctx, l)
		}
	case r.popped || (r.err != nil && !topology.IsReply(r.err) && !errors.Is(r.err, ErrNotReplicated)):
		l.giveBackNow(ctx)
	}
}

// pipeWait runs req (see waitAndTry) and the try of in after it. popped
// reports whether the BLPOP took a wake-up signal: if the caller then ends
// without the lock, whatever the try's result (an error reply such as OOM
// included), it must give the signal back, or a waiter of another process
// may sleep on. A waiter that gave up (see abandonWait) sends no try after
// its BLPOP.
//
// With replica ack the try is never pipelined: WAIT must follow it on the
// connection it ran on, the key's master (see core.try).
func (l *core) pipeWait(ctx context.Context, req *wait.Req, in *identity, tk *wait.Ticket) waitResult {
	round, err := wait.On(ctx, l.client, req)
	if err != nil {
		return waitResult{err: err}
	}
	return l.afterWait(ctx, round, in, tk)
}

// settled reports whether round needs nothing more from Redis to be read:
// its BLPOP answered and so did the try pipelined behind it.
func settled(round wait.Round) bool {
	return round.Err == nil && round.Try != nil && round.Try.Err() == nil
}

// afterWait reads the outcome of a round of waiting (see pipeWait).
func (l *core) afterWait(ctx context.Context, round wait.Round, in *identity, tk *wait.Ticket) waitResult {
	perr := round.Err
	r := waitResult{popped: round.Popped, woken: round.Woken, slept: round.Slept, moving: topology.Is(perr)}
	r.res, r.err = l.afterRound(ctx, round, in, tk)
	if (round.Try != nil || round.Popped) && clientClosed(l.client) {
		// The round ran on the runtime's connections, which outlive the
		// caller's client: what it took for a client closed meanwhile
		// is given back there, and the wait ends as the client's
		// commands do.
		l.undoOnRuntime(ctx, r)
		return waitResult{err: errClosedWhileWaiting}
	}
	if perr != nil && topology.IsReply(perr) && !r.moving && r.err == nil && r.res.status == wire.Busy {
		// The signal key is not a list (WRONGTYPE): BLPOP returns at once,
		// so carrying on would spin. The try's result stands if it won.
		r.err = fmt.Errorf("wait on %q: %w", l.keys[1], perr)
	}
	return r
}

// afterRound returns the outcome of the try after a round of waiting: the
// one pipelined behind its BLPOP, or one sent now.
//
// When the connection failed (a restart, say), the BLPOP may have popped a
// signal, and the try behind it run unheard of. A try sent now on the
// caller's client (which retries as it is told) settles both, as go-redis's
// retry of the pair once did: it finds the lock ours (our own id), free
// (and takes it), or held by someone whose release signals again. Wait
// connections never retry on their own: a BLPOP sent twice would pop a
// second waiter's signal. Without retries (MaxRetries -1), after a
// Shutdown, or when its waiter gave up, the error is returned instead, and
// what may have been taken is given back (see core.fail, abandonWait).
func (l *core) afterRound(ctx context.Context, round wait.Round, in *identity, tk *wait.Ticket) (acquireResult, error) {
	perr := round.Err
	moving := topology.Is(perr)
	lost := perr != nil && !moving && !topology.IsReply(perr)
	var (
		res acquireResult
		err error
	)
	switch {
	case lost && (round.Gone || maxRetries(l.client) == 0 || errors.Is(perr, redis.ErrClosed)):
		return acquireResult{}, perr
	case lost:
		res, err = l.tryAs(ctx, tryWoken, tk)
	case round.Try != nil && in.wokenSet != nil:
		res, err = l.afterSet(ctx, round.Try, in, tk)
	case round.Try != nil:
		res, err = l.acked(ctx, in.id, round.Try, nil)
	case round.Gone:
		return acquireResult{}, nil
	case moving:
		res, err = l.tryAs(ctx, tryFirst, tk)
	default:
		res, err = l.tryAs(ctx, tryWoken, tk)
	}
	return l.tryAgain(ctx, moving, res, err, tk)
}

// afterSet reads the reply of a woken try sent as a plain SET NX (see
// identity.wokenSet): OK took the lock; a nil reply found it held, and the
// acquire script is sent then (in mode "2", as the SET was), for what a
// busy try must tell: the holder's PTTL, or that the key holds our own id.
func (l *core) afterSet(ctx context.Context, cmd *redis.Cmd, in *identity, tk *wait.Ticket) (acquireResult, error) {
	switch err := cmd.Err(); {
	case err == nil:
		return acquireResult{status: wire.Acquired, id: in.id}, nil
	case errors.Is(err, redis.Nil):
		return l.tryAs(ctx, tryWoken, tk)
	default:
		return acquireResult{id: in.id}, err
	}
}

// tryAgain sends the try after a wait once more where it could not run:
// the node answered the BLPOP with UNBLOCKED (it became a replica in a
// failover) and closed the connection (moving, and a connection error),
// or the script cache was empty (a restart, SCRIPT FLUSH), or the slot
// moves (MOVED, ASK, TRYAGAIN...). It is sent on its own, with EVAL when
// needed, following redirects; res and err stand otherwise.
func (l *core) tryAgain(ctx context.Context, moving bool, res acquireResult, err error, tk *wait.Ticket) (acquireResult, error) {
	if moving && err != nil && !topology.IsReply(err) {
		topology.RefreshSlots(ctx, l.client) // find the new master
		res, err = l.try(ctx, true, tk)
	}
	if wire.IsNoScript(err) || topology.Is(err) {
		res, err = l.try(ctx, true, tk)
	}
	return res, err
}

// errClosedWhileWaiting ends a wait whose client the caller closed.
var errClosedWhileWaiting = fmt.Errorf("redislock: the client was closed while waiting: %w", redis.ErrClosed)

// clientClosed reports whether the caller closed client. A closed
// *redis.Client's pool holds no connection (go-redis empties it, and
// refuses new ones): one that holds some is open, which is read without a
// command, so a waiter's rounds run nothing through the client's hooks (a
// user's tracing hook would record each). Otherwise a probe: go-redis
// refuses a command on a closed client before anything else, and one whose
// context has ended before it takes a connection, so it sends nothing (a
// hook on the client sees a PING fail with context.Canceled). A cluster
// client's pool figures are not asked for: they may read the cluster's
// state from the network.
func clientClosed(client redis.UniversalClient) bool {
	if c, ok := client.(*redis.Client); ok && c.PoolStats().TotalConns > 0 {
		return false
	}
	return errors.Is(client.Ping(ended).Err(), redis.ErrClosed)
}

// ended is a context that has ended.
var ended = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// undoOnRuntime gives back, on the connections of the wait runtime, what
// round r took for a client that was closed meanwhile: the lock its
// pipelined try took (released, which wakes the next waiter), or the
// signal its BLPOP popped.
func (l *core) undoOnRuntime(ctx context.Context, r waitResult) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	via, err := wait.Own(ctx, l.client, l.keys[1])
	if err != nil {
		return
	}
	switch {
	case r.err == nil && r.res.status == wire.Acquired:
		_ = l.scripts.release.Run(ctx, via, l.keys, r.res.id, l.signalExpireMS, l.turnMS).Err()
		if r.popped {
			l.reg.passOn(ctx, l) // on the runtime too (see giveBackNow)
		}
	case r.popped:
		l.giveBackNow(ctx)
	}
}

// maxRetries returns how many times client retries a command (go-redis's
// default 3; none when its MaxRetries is -1).
func maxRetries(client redis.UniversalClient) int {
	n := 3
	switch c := client.(type) {
	case interface{ Options() *redis.Options }:
		n = c.Options().MaxRetries
	case interface{ Options() *redis.ClusterOptions }:
		n = c.Options().MaxRetries
	}
	return max(n, 0)
}
