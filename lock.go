package redislock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/hold"
	"github.com/go-redis-lock/redislock/internal/watch"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// A Lock is a named lock in Redis, held by at most one owner at a time
// across every process that uses the same Redis and key prefix,
// python-redis-lock's included. It is safe for concurrent use; shared by
// goroutines, it is a sync.Mutex: an Acquire waits, first behind the other
// goroutines that use the same *Lock, until the hold before it is released
// (Release, or the end of Do), even in the goroutine that holds. A lost
// hold still needs its Release before the next Acquire goes ahead. Done
// and Err report each hold as a context does.
type Lock struct {
	core // first: the Lock's cleanup (see run) is attached to its address
}

// New returns a Lock for name on client: a *redis.Client (single node or
// Sentinel failover), a *redis.ClusterClient or any redis.UniversalClient
// but a *redis.Ring. It sends nothing to Redis: it only checks its
// arguments; an error matching ErrInvalidArgument (ErrNilClient for a nil
// client), wrapped with the name, says what is wrong.
func New(client redis.UniversalClient, name string, opts ...Option) (*Lock, error) {
	if isNil(client) {
		return nil, fmt.Errorf("lock %q: %w", name, ErrNilClient)
	}
	if err := checkClient(client); err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	if name == "" {
		return nil, fmt.Errorf("lock %q: %w", name, errInvalidName)
	}
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	tagged, err := c.tagged(client)
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	rt := readTimeout(client)
	if err := c.ack.fits(rt); err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	ks := wire.NewScheme(c.prefix, tagged)
	if err := checkName(ks, name); err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	keys := []string{ks.LockKey(name), ks.SignalKey(name), ks.TurnKey(name)}
	var fence string
	if c.fencing {
		fence = ks.FenceKey(name)
	}
	l := &Lock{}
	l.core.init(client, name, lockProtocol{}, c, rt, keys, fence, nil)
	l.queued = true
	return l, nil
}

// Name returns the lock's name, as given to New.
func (l *Lock) Name() string { return l.name }

// ID returns the owner id this Lock stores in the lock key: the one given
// with WithID, which never changes, or a random one, replaced after an
// attempt without a reply (see docs/reference.md in the repository). A
// release without a reply may leave the old id in the key, keeping the
// lock from everyone, this Lock included, until the next Release or its
// expire.
func (l *Lock) ID() string { return l.ownerID() }

// Key returns the Redis key that holds the lock (by default "lock:"+name).
func (l *Lock) Key() string { return l.keys[0] }

// Acquire takes the lock, waiting as long as ctx allows while it is held
// elsewhere, and returns nil once it holds it, until Release or a loss (see
// Done). Otherwise:
//   - ctx ended while the lock was held, by another owner (Redis's last
//     answer) or by another goroutine through this *Lock: ErrLocked,
//     matching ctx's error too;
//   - Redis did not answer, or has stopped answering when ctx ends:
//     ErrUnreachable (after one more read, given the client's read
//     timeout), never ErrLocked;
//   - ctx had ended before the call: its error alone, nothing sent;
//   - the key holds this Lock's caller-given id: ErrAlreadyAcquired;
//   - another Redis error, wrapped: the lock is not held.
//
// A release wakes a waiter at once; a holder that died, when its key
// expires. When ctx ends during a wait, Acquire returns after one read of
// the key and finishes the wait in the background (see Settle).
func (l *Lock) Acquire(ctx context.Context) error {
	_, err := l.runQueued(ctx, true)
	return err
}

// TryAcquire takes the lock if it is free, in one round trip, without
// waiting. It returns ErrLocked when another owner holds it; for up to 100
// ms after a release that woke a waiter, which has its turn; and at once
// while another goroutine holds, acquires or releases through this Lock, as
// sync.Mutex.TryLock returns false. Its other errors are Acquire's.
func (l *Lock) TryAcquire(ctx context.Context) error {
	_, err := l.runQueued(ctx, false)
	return err
}

// runQueued is run after this Lock's local turn (see Lock): the turn is
// given back when the acquire fails, or by the Release of its hold.
func (l *core) runQueued(ctx context.Context, blocking bool) (*hold.Hold, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	select {
	case l.turn <- struct{}{}:
	default:
		if !blocking {
			return nil, l.wrap(fmt.Errorf("%w: held by another goroutine of this process through the same value", ErrLocked))
		}
		select {
		case l.turn <- struct{}{}:
		case <-ctx.Done():
			return nil, l.wrap(fmt.Errorf("%w: waited behind another goroutine's hold through the same value: %w", ErrLocked, ctx.Err()))
		}
	}
	var handed bool // the turn went with the hold run started (set by run, in this goroutine)
	defer func() {
		// Failed, or an observer panicked: the turn is still ours unless
		// the hold started, which then has it (and its first release gives
		// it back, maybe another goroutine's Release before run returned:
		// hence the flag, not a look at turnHold).
		if !handed {
			<-l.turn
		}
	}()
	return l.run(ctx, blocking, &handed)
}

// run moves the local state to acquiring, acquires, and starts the hold,
// which it returns. A hold that was lost counts as over (a Lock's Acquire
// waits for its local turn, which that hold's Release gives back). When
// the turn goes with the hold, run sets *handed (nil for a core that takes
// no turns).
func (l *core) run(ctx context.Context, blocking bool, handed *bool) (*hold.Hold, error) {
	l.mu.Lock()
	prev := l.hold
	if l.state == stateAcquiring || l.state == stateReleasing || (l.state == stateHeld && !prev.Ended()) {
		l.mu.Unlock()
		return nil, l.wrap(ErrAlreadyAcquired)
	}
	l.state = stateAcquiring
	l.mu.Unlock()
	var began time.Time
	if l.ev != nil {
		began = time.Now()
		ctx = l.observeStart(stateIdle, func() context.Context { return l.ev.acquireStart(ctx, l.info(l.ownerID()), blocking) })
	}
	if prev != nil {
		prev.Retire(ctx) // a lost hold's goroutine is exiting
	}
	h, err := l.take(ctx, blocking)
	l.mu.Lock()
	if err == nil {
		l.state, l.hold = stateHeld, h
		if l.queued {
			l.turnHold = h // the turn now goes with the hold (see giveTurn)
			*handed = true
		}
	} else {
		l.state, h = stateIdle, nil
	}
	l.mu.Unlock()
	if l.ev != nil {
		id, token := l.ownerID(), int64(0)
		if h != nil {
			id, token = h.ID(), h.Token()
		}
		l.ev.acquireEnd(ctx, l.info(id), blocking, time.Since(began), token, err, ctx.Err())
		if h != nil {
			h.Announce()
		}
	}
	return h, err
}

// take acquires the lock (after any giveback still running, which could
// release what we are about to take) and starts its hold: its renewal,
// its watch.
func (l *core) take(ctx context.Context, blocking bool) (*hold.Hold, error) {
	if err := ctx.Err(); err != nil { // nothing asked, nothing known: its error alone
		return nil, l.wrap(err)
	}
	if err := l.cleanups.Wait(ctx); err != nil { // our own cleanup, not another owner
		// Not busy: an earlier attempt's giveback, or a given-up wait's
		// wake-up, had not been answered yet.
		return nil, l.wrap(fmt.Errorf("acquire: %w: an earlier attempt's cleanup had no answer yet: %w", ErrUnreachable, err))
	}
	sent, won, err := l.acquire(ctx, blocking)
	if err != nil {
		return nil, err
	}
	sent = l.freshen(ctx, sent, won.id)
	h := hold.New(l.holdConfig(won.token), sent, won.id)
	if l.autoRenewal {
		if err := h.StartRenewal(sent); err != nil {
			h.End(err)
			l.giveBack(ctx)
			return nil, l.wrap(err)
		}
	}
	if l.tracking {
		h.SetWatch(watch.Start(ctx, l.client, l.keys[0], h))
	}
	if l.autoRenewal || h.Watched() {
		// A renewal goroutine and a watch are what l, dropped while
		// holding, would leave behind.
		h.SetCleanup(runtime.AddCleanup(l, hold.Abandon, h))
	}
	return h, nil
}

// holdConfig is what l's holds are made of.
func (l *core) holdConfig(token int64) hold.Config {
	c := hold.Config{
		Client: l.client,
		Keys:   l.extendKeys,
		Extend: l.scripts.extend,
		Reads:  l.proto.readsOwner(),
		Expire: l.expire,
		Margin: l.margin,
		Max:    l.maxHold,
		Token:  token,
		Ack:    l.ack,
	}
	if l.ev != nil {
		c.Events = holdEvents{e: l.ev, name: l.name, kind: l.proto.ref()}
	}
	return c
}

// freshen returns the moment a new hold's local validity counts from. It
// is sent, when the winning try was sent, unless half the expire or more
// has gone by since: a try pipelined behind a BLPOP runs when the BLPOP
// returns, and Redis ends a BLPOP that times out on its own clock tick,
// up to 1/hz late (100 ms with the default hz 10), so a short expire could
// be spent before the reply is in, and the hold born lost. Then the key is
// read (GET and PTTL in one round trip): holding id with t left, it was
// set no earlier than the expire less t before the read was sent, and
// the hold counts from then. A read that fails, or finds the key gone or
// another's, changes nothing: the hold is then lost at its deadline, or
// by its renewal or watch, as it would have been.
func (l *core) freshen(ctx context.Context, sent time.Time, id string) time.Time {
	if l.expire == 0 || time.Since(sent) < l.expire/2 || !l.proto.readsOwner() {
		return sent
	}
	rctx, cancel := context.WithTimeout(ctx, l.expire)
	defer cancel()
	var (
		get  *redis.StringCmd
		pttl *redis.DurationCmd
	)
	readSent := time.Now()
	if _, err := l.client.Pipelined(rctx, func(p redis.Pipeliner) error {
		get, pttl = p.Get(rctx, l.keys[0]), p.PTTL(rctx, l.keys[0])
		return nil
	}); err != nil || get.Val() != id || pttl.Val() <= 0 {
		return sent
	}
	if from := readSent.Add(pttl.Val() - l.expire); from.After(sent) {
		return from
	}
	return sent
}

// observeStart runs an observer's Start, which returns the context the
// call goes on with. Should it panic, the Lock goes back to the state it
// had before the call (before) as the panic goes on up: the call never ran.
func (l *core) observeStart(before lockState, start func() context.Context) context.Context {
	ok := false
	defer func() {
		if !ok {
			l.mu.Lock()
			l.state = before
			l.mu.Unlock()
		}
	}()
	ctx := start()
	ok = true
	return ctx
}

// Settle waits, as long as ctx allows, for what this Lock still does in the
// background (finishing an Acquire given up while it waited, undoing an
// attempt whose reply was lost), and returns ctx's error if ctx ends first.
// The next Acquire, TryAcquire and Release wait for it anyway; a process
// that gives up an Acquire and exits calls Settle first, or a waiter
// elsewhere may wake late, or the lock stay taken until its expire.
func (l *Lock) Settle(ctx context.Context) error { return l.settle(ctx) }

// settle is Settle, for every primitive.
func (l *core) settle(ctx context.Context) error {
	err := l.cleanups.Wait(ctx)
	if err == nil {
		return nil
	}
	return l.wrap(fmt.Errorf("settle: %w", err))
}

// Locked reports whether anyone holds the lock: whether its key exists.
func (l *Lock) Locked(ctx context.Context) (bool, error) {
	n, err := l.client.Exists(ctx, l.keys[0]).Result()
	if err != nil {
		return false, l.wrap(fmt.Errorf("locked: %w", err))
	}
	return n == 1, nil
}

// OwnerID returns the id stored in the lock key: whoever holds the lock.
// It returns "" and a nil error when the lock is free. The value is
// returned byte for byte, even when another client stored bytes that are
// not UTF-8.
func (l *Lock) OwnerID(ctx context.Context) (string, error) {
	id, err := l.client.Get(ctx, l.keys[0]).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", l.wrap(fmt.Errorf("owner id: %w", err))
	}
	return id, nil
}

// wrap adds the lock's name to err.
func (l *core) wrap(err error) error {
	if l.proto == nil { // a zero value
		return err
	}
	return fmt.Errorf("%s %q: %w", l.proto.kind(), l.name, err)
}

// Done returns a channel that is closed when this Lock does not hold the
// lock: open from a successful Acquire until the hold ends, by Release or
// by loss (Err then says which); closed before the first acquire. As a
// context's, every call during one hold returns the same channel. A loss
// closes it within milliseconds of someone else's change to a watched key
// (WithTracking), at a renewal that finds the key gone or another's, or
// when no renewal succeeded before the expire less the safety margin ran
// out, unless the key, read once then, still holds this Lock's id with more
// time left (another Lock or process with the id extended it).
func (l *Lock) Done() <-chan struct{} { return l.done() }

// done is Done, for every primitive.
func (l *core) done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hold == nil {
		return l.neverHeld
	}
	return l.hold.Done()
}

// Err returns nil while the current hold lasts. After Done is closed it
// returns why, and keeps returning the same error until the next Acquire:
// an error matching ErrLost and its reason (see ErrLost), ErrReleased
// after Release, or ErrNotAcquired before the first acquire.
func (l *Lock) Err() error { return l.holdErr() }

// holdErr is Err, for every primitive.
func (l *core) holdErr() error {
	l.mu.Lock()
	h := l.hold
	l.mu.Unlock()
	if h == nil {
		return l.wrap(ErrNotAcquired)
	}
	if err := h.Err(); err != nil {
		return l.wrap(err)
	}
	return nil
}
