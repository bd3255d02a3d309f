package redislock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/wait"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// Waiting for a lock.
//
// A waiter never polls. After a failed try it sends, in one pipeline,
// BLPOP on the signal list with a timeout (the slice) followed by the next
// try-acquire; Redis runs the try the instant BLPOP returns, so a woken
// waiter learns in the same round trip whether it now holds the lock. A
// release pushes one element onto the signal list, which wakes exactly one
// waiter.

const (
	// defaultMaxSlice caps one BLPOP, so that a lock without expire is
	// re-checked now and then and a dead connection is noticed.
	defaultMaxSlice = 2 * time.Second

	// minSlice is the shortest BLPOP sent (see wait.MinSlice).
	minSlice = wait.MinSlice

	// cleanupTimeout bounds the giveback script run after a lost reply.
	cleanupTimeout = 2 * time.Second
)

// readTimeout returns client's read timeout; <= 0 means none.
func readTimeout(client redis.UniversalClient) time.Duration {
	switch c := client.(type) {
	case interface{ Options() *redis.Options }:
		return c.Options().ReadTimeout
	case interface{ Options() *redis.ClusterOptions }:
		return c.Options().ReadTimeout
	case interface{ Options() *redis.RingOptions }:
		return c.Options().ReadTimeout
	}
	return 3 * time.Second // go-redis's default
}

// maxSliceFor returns the longest BLPOP for a Lock with the given expire
// and replica ack on a client with read timeout rt. A blocking command
// that outlasts the read timeout fails with an i/o timeout (pipelined or
// not), so a slice and the WAIT behind it stay within two thirds of it.
// Slices also stay at a third of the Lock's own expire: the local validity
// clock of a hold starts when its try was sent, which for the try
// pipelined behind a BLPOP is up to a slice before the key was set.
func maxSliceFor(rt, expire time.Duration, ack replicaAck) time.Duration {
	d := defaultMaxSlice
	if rt > 0 { // -1 and -2: no read deadline at all
		d = min(d, rt*2/3-ack.timeout)
	}
	if expire > 0 {
		d = min(d, expire/3)
	}
	return max(d, minSlice)
}

// expiresHint is what a waiter leaving the queue tells the next one about
// the holder's expiry, from its last try, sent at sent: our own expire when
// we acquired, the holder's PTTL when it was busy, nothing when we do not
// know. Counted from when the try was sent, it is never late.
func (l *core) expiresHint(res acquireResult, err error, sent time.Time) time.Time {
	switch {
	case err != nil:
		return time.Time{}
	case res.status == wire.Acquired && l.expire > 0:
		return sent.Add(l.expire)
	case res.status == wire.Busy && res.pttl > 0:
		return sent.Add(time.Duration(res.pttl) * time.Millisecond)
	}
	return time.Time{}
}

// try runs the acquire script once. A try that would not wait (blocking
// false) is sent, for a protocol whose busy tries register the caller as
// waiting, in the mode that does not register; q is the caller's local
// queue, if any (see prepared).
func (l *core) try(ctx context.Context, blocking bool, tk *wait.Ticket) (acquireResult, error) {
	mode := tryFirst
	if !blocking && l.reg.only() {
		mode = tryOnly
	}
	return l.tryAs(ctx, mode, tk)
}

// tryAs runs the acquire script once, as a try of mode m (tryFirst,
// tryWoken or tryOnly); a topology reply has it sent again without the
// turn keys (trySolo), or, for tryOnly, as it was.
func (l *core) tryAs(ctx context.Context, mode tryMode, tk *wait.Ticket) (acquireResult, error) {
	in := l.ident.Load()
	solo := trySolo
	if mode == tryOnly {
		solo = tryOnly // the solo keys are all the keys: it registers nothing either
	}
	acquireCmd, acquireArgs := l.prepared(in, mode, tk)
	if !l.ack.on() {
		cmd := wire.RunPrepared(ctx, l.client, acquireCmd, l.scripts.acquire, l.acquireKeys, acquireArgs)
		if topology.Is(cmd.Err()) {
			// The slot migrates: a script on several keys, some of them
			// missing, is answered TRYAGAIN until it ends. Without the
			// turn keys a plain acquire has one key, which the importing
			// node serves (a fenced one has two, and is retried).
			soloCmd, soloArgs := l.prepared(in, solo, tk)
			_ = topology.Do(ctx, l.client, func() error {
				cmd = wire.RunPrepared(ctx, l.client, soloCmd, l.scripts.acquire, l.soloKeys, soloArgs)
				return cmd.Err()
			})
		}
		res, err := parseAcquire(cmd)
		res.id = in.id
		return res, err
	}
	_, soloArgs := l.prepared(in, solo, tk)
	cmd, ackErr := l.ack.runOr(ctx, l.client, l.scripts.acquire, l.acquireKeys, acquireArgs, l.soloKeys, soloArgs)
	return l.acked(ctx, in.id, cmd, ackErr)
}

// tryMode says which of an identity's prepared tries to send.
type tryMode int

const (
	tryFirst tryMode = iota // not woken (ARGV mode "1")
	tryWoken                // behind a BLPOP ("2")
	trySolo                 // without the turn keys ("0")
	tryOnly                 // a try that will not wait, registering nothing ("3")
)

// prepared returns the command and ARGV of a try of in in mode m. For a
// protocol whose waiters register by their local queue, the queue's token
// (q's; "" without a queue) is appended to the ARGV, and the command built
// for this call.
func (l *core) prepared(in *identity, m tryMode, tk *wait.Ticket) (cmd, args []any) {
	keys := l.acquireKeys
	switch m {
	case tryWoken:
		cmd, args = in.wokenCmd, in.wokenArgs
	case trySolo:
		cmd, args, keys = in.soloCmd, in.soloArgs, l.soloKeys
	case tryOnly:
		cmd, args = in.onlyCmd, in.onlyArgs
	default:
		cmd, args = in.acquireCmd, in.acquireArgs
	}
	token, ok := l.reg.token(tk)
	if !ok {
		return cmd, args
	}
	args = append(slices.Clone(args), token)
	return wire.EvalShaCmd(l.scripts.acquire, keys, args), args
}

// acked parses the reply of an acquire sent with id and, when it took the
// lock but too few replicas acknowledged it, releases the key again (as
// Release would, id renewal included) and returns ackErr.
func (l *core) acked(ctx context.Context, id string, cmd *redis.Cmd, ackErr error) (acquireResult, error) {
	res, err := parseAcquire(cmd)
	res.id = id
	if err != nil || res.status != wire.Acquired || ackErr == nil {
		return res, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _, unanswered, rerr := l.sendRelease(rctx, id)
	l.afterRelease(id, unanswered, rerr)
	return res, ackErr
}

// slice is how long the next BLPOP may block: no longer than the holder's
// remaining TTL (its waiters wake when a dead holder's key expires), the
// time left on ctx, and maxSlice; never less than minSlice.
func (l *core) slice(ctx context.Context, pttl int64) time.Duration {
	d := l.maxSlice
	if pttl >= 0 {
		// 0: the holder's key has less than a millisecond left (PTTL
		// rounds down), so the shortest slice, not the longest; -1: it
		// never expires.
		d = min(d, time.Duration(pttl)*time.Millisecond)
	}
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline))
	}
	return max(d, minSlice)
}

// fail turns an error from an acquire attempt into Acquire's result. When
// the error is not a reply from Redis (a broken connection, an ended
// context) the attempt may have run without our hearing of it: it may hold
// the lock for us, or a wake-up signal may have been consumed on our
// behalf. When popped, the BLPOP took a signal and the try failed, even
// with a reply (OOM under noeviction, say). The giveback script, on a
// context of its own, undoes both. It runs even under OOM: its first
// write is a DEL, after which Redis lets a script's writes through. With
// ErrNotReplicated the acquire already released what it took, waking the
// next waiter. busy says that Redis answered "held" earlier in the
// attempt: a try cut short by ctx's end then ends it as a wait would,
// with ErrLocked if Redis still answers.
func (l *core) fail(ctx context.Context, err error, popped, busy bool) error {
	if (popped || !topology.IsReply(err)) && !errors.Is(err, ErrNotReplicated) {
		l.ev.gaveBack(ctx, l.info(l.ownerID()), err)
		l.giveBack(ctx)
	}
	cerr := ctx.Err()
	if busy && cerr != nil && unanswered(err) {
		// Cut short by ctx's end after Redis said "held": busy, if Redis
		// still answers (see waitAndTry).
		if !l.answers(ctx) {
			return l.wrap(fmt.Errorf("acquire: %w", l.silent(ctx)))
		}
		return l.wrap(fmt.Errorf("%w: %w", ErrLocked, cerr))
	}
	return l.wrap(acquireErr(cerr, err))
}

// acquireErr is the error of an acquire whose try failed with err, ctx's
// error being cerr: never ErrLocked, which says that Redis answered
// "held". A try Redis did not answer (a connection refused, lost or timed
// out, or ctx ended first) matches ErrUnreachable, with ctx's error and
// the try's own, once each; an error reply, or one of the package's own
// errors, is returned as it is.
func acquireErr(cerr, err error) error {
	switch {
	case !unanswered(err):
		return fmt.Errorf("acquire: %w", err)
	case cerr == nil || errors.Is(err, cerr):
		return fmt.Errorf("acquire: %w: %w", ErrUnreachable, err)
	}
	return fmt.Errorf("acquire: %w: %w (last error: %w)", ErrUnreachable, cerr, err)
}

// unanswered reports whether err says that Redis did not answer: the
// connection failed, was closed by the server or timed out, or the
// context ended first.
func unanswered(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// giveBack releases the lock if it holds our random id and pushes the
// signal back if the lock is free. It runs in a goroutine of its own, so
// that a connection that stopped answering does not hold up the caller a
// second time; the next Acquire or Release of l waits for it, so it can
// never undo a later acquisition that it has answered for. A giveback with
// an attempt that got no reply (go-redis retried it, or gave up) may still
// reach Redis much later (a request held by a partition runs when it
// heals); a Lock with its own random id then takes a fresh id, so that the
// late giveback cannot match a key this Lock acquires since. Errors are dropped otherwise: the lock's expire is then
// the backstop, and the waiters' slices are bounded by it.
func (l *core) giveBack(ctx context.Context) {
	l.cleanups.Add()
	go func() {
		defer l.cleanups.Done()
		l.giveBackNow(ctx)
	}()
}

// unregister takes back with the script leave, in the background, the
// registration as a waiter of id (see registration), a queue generation's
// token or this core's own id, once the abandoned waits counted by pending
// are finished: the try behind such a wait's BLPOP would register it
// again. The next Acquire or Release waits for it. Errors are
// dropped: a registration lapses on its own, a slice and a second after
// it was last renewed. For a client closed meanwhile, it is sent on the
// runtime's connections (see onRuntimeIfClosed).
func (l *core) unregister(leave *redis.Script, id string, pending *wait.Cleanups) {
	l.cleanups.Add()
	go func() {
		defer l.cleanups.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_ = pending.Wait(ctx)
		err := leave.Run(ctx, l.client, l.keys, id, l.signalExpireMS).Err()
		// A writer's registration kept readers out, and an admission
		// writers, until they lapsed.
		_ = l.onRuntimeIfClosed(ctx, err, func(via redis.Scripter) error {
			return leave.Run(ctx, via, l.keys, id, l.signalExpireMS).Err()
		})
	}()
}

// giveBackNow runs the giveback script (see giveBack) and waits for it;
// for a client closed meanwhile, on the runtime's connections (see
// onRuntimeIfClosed).
func (l *core) giveBackNow(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	id := l.ownerID()
	sha, eval := &countedArg{s: id}, &countedArg{s: id}
	err := l.scripts.giveback.EvalSha(ctx, l.client, l.keys, sha, l.signalExpireMS, l.ownFlag(), l.turnMS).Err()
	if wire.IsNoScript(err) { // not cached: EVAL caches it
		err = l.scripts.giveback.Eval(ctx, l.client, l.keys, eval, l.signalExpireMS, l.ownFlag(), l.turnMS).Err()
	}
	retried := sha.sends.Load() > 1 || eval.sends.Load() > 1
	err = l.onRuntimeIfClosed(ctx, err, func(via redis.Scripter) error {
		return l.scripts.giveback.Run(ctx, via, l.keys, id, l.signalExpireMS, l.ownFlag(), l.turnMS).Err()
	})
	if l.autoID && (retried || (err != nil && !topology.IsReply(err))) {
		// An attempt got no reply and may run later, when this Lock
		// may hold the lock again under the same id: it would delete
		// that hold. A fresh id makes it miss.
		l.renewID()
	}
}

// ownFlag is the scripts' ARGV flag saying whether the id is this Lock's
// own random one: "1", or "0" for a caller-given id.
func (l *core) ownFlag() string {
	if l.autoID {
		return "1"
	}
	return "0"
}

// turnFor is how long a release (or a reset, or a giveback that pushes
// the signal back) gives the waiter it woke to take the lock before
// acquires of this library that were not woken may (see internal/wire/lua/release.lua),
// in the scripts' milliseconds: 100 ms, within which a python-redis-lock
// waiter takes it in its second round trip after the BLPOP; never longer
// than the signal expire, since a turn must not outlive the signal it
// comes with (an acquire reads a turn key without a signal list as a
// signal popped by a waiter). A woken waiter that died meanwhile holds up
// the others about that long.
func turnFor(signalExpire time.Duration) string {
	return strconv.FormatInt(turnDuration(signalExpire).Milliseconds(), 10)
}

// turnDuration is the turn of turnFor.
func turnDuration(signalExpire time.Duration) time.Duration {
	return min(100*time.Millisecond, signalExpire).Truncate(time.Millisecond)
}

// onRuntimeIfClosed runs undo on the connections of the client's wait
// runtime when err says the caller closed its client: what a wait took,
// or left registered, for a client closed while it waited (or while its
// caller gave up) is undone there, since they outlive the client. It
// returns undo's error then, err otherwise.
func (l *core) onRuntimeIfClosed(ctx context.Context, err error, undo func(via redis.Scripter) error) error {
	if !errors.Is(err, redis.ErrClosed) {
		return err
	}
	via, oerr := wait.Own(ctx, l.client, l.keys[1])
	if oerr != nil {
		return err
	}
	return undo(via)
}
