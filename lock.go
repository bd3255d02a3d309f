package redislock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/wait"
	"github.com/go-redis-lock/redislock/internal/watch"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// A Lock is a named lock in Redis, held by at most one owner at a time
// across every process that uses the same Redis and key prefix, including
// python-redis-lock processes.
//
// A Lock is safe for concurrent use by several goroutines, and holds at
// most one acquisition at a time: Acquire on a Lock that holds (or is
// acquiring or releasing) returns ErrAlreadyAcquired. Goroutines that each
// need their turn use a Lock each for the same name, or share one through
// its Locker, which queues them locally.
//
// Each successful acquire starts a hold, which ends at Release or when the
// lock is lost; Done and Err report it as a context does.
type Lock struct {
	core // first: the Lock's cleanup (see run) is attached to its address
}

// core is the machinery every primitive of the package runs on: trying
// with a script, waiting in BLPOP with the next try pipelined behind it,
// the local wait queue, holds with their local deadline, renewal and loss,
// giving back after a lost reply, releasing, fencing and replica
// acknowledgement. A primitive (Lock, Semaphore) embeds one, configured
// with its keys and its scripts (protocol), and adds its API; nothing here
// calls up into a primitive.
type core struct {
	proto        protocol     // the primitive: its names, scripts and waiters' registration
	scripts      scripts      // proto's
	reg          registration // proto's
	client       redis.UniversalClient
	name         string
	keys         []string // {lock key, signal key, turn key}: KEYS of release, reset and giveback
	acquireKeys  []string // KEYS of the acquire script: {lock, signal, turn[, fence]}
	soloKeys     []string // KEYS of the acquire script without the turn: {lock[, fence]}
	extendKeys   []string // KEYS of the extend script: {lock}
	acquireExtra []any    // ARGV of every try after the four of the Lock's (the semaphore's size)
	autoID       bool     // the id is this Lock's own random one, in no other Lock

	// ident is the owner id and what is made from it. It changes only for a
	// Lock with its own random id, after a giveback whose outcome stayed
	// unknown (see giveBack).
	ident atomic.Pointer[identity]

	expire         time.Duration // 0: never expires
	expireMS       string        // ARGV form of the expire; "0" for none
	signalExpireMS string        // ARGV form of the signal expire
	turnMS         string        // ARGV form of the turn (see turnFor)
	releaseCmd     []any         // the release's EVALSHA, the id (slot releaseIDArg) left nil; nil unless 3 keys
	autoRenewal    bool
	tracking       bool          // watch held keys (WithTracking)
	margin         time.Duration // WithSafetyMargin, or its default
	maxHold        time.Duration // 0: no cap
	ack            replicaAck
	maxSlice       time.Duration // longest single BLPOP
	neverHeld      chan struct{} // closed; Done before the first acquire
	cleanups       wait.Cleanups // giveback scripts still running
	abandons       wait.Cleanups // abandoned waits still being finished (also in cleanups)
	turn           chan struct{} // Locker's local mutex: one slot
	ev             *events       // observers and logger; nil: none

	// mu guards the fields below.
	mu         sync.Mutex
	state      lockState
	hold       *hold  // the current or last acquisition; nil before the first
	unreleased string // an earlier id whose release got no reply; see afterRelease
}

// lockState is what this Lock value believes; Redis has the last word.
type lockState int

const (
	stateIdle      lockState = iota // not held by this Lock
	stateAcquiring                  // an Acquire or TryAcquire is running
	stateHeld                       // acquired and not yet released
	stateReleasing                  // a Release of the hold is running
)

// New returns a Lock for name on client. It sends nothing to Redis: it only
// checks its arguments, returning ErrNilClient, ErrInvalidName or an
// option's error (all matching ErrInvalidArgument), wrapped with the name.
//
// client may be a *redis.Client (single node or Sentinel failover), a
// *redis.ClusterClient or any redis.UniversalClient. Whatever the client's options, an Acquire returns as soon as its
// context ends, cancelled or past its deadline, even while it waits in
// Redis; see Settle for what it leaves running behind it.
func New(client redis.UniversalClient, name string, opts ...Option) (*Lock, error) {
	if client == nil {
		return nil, fmt.Errorf("lock %q: %w", name, ErrNilClient)
	}
	if err := checkClient(client); err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	if name == "" {
		return nil, fmt.Errorf("lock %q: %w", name, ErrInvalidName)
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
	return l, nil
}

// init sets up a new core for the primitive proto, named name, with the
// checked config c on client (whose read timeout is rt). keys are the
// KEYS of its release and giveback scripts: the primitive's main key, its
// signal list, and a third key of its own (the Lock's turn key); fence is
// the fence key, "" without fencing; extraArgs follow the four ARGV of
// every try.
func (l *core) init(client redis.UniversalClient, name string, proto protocol, c config, rt time.Duration, keys []string, fence string, extraArgs []any) {
	acquireKeys := slices.Clone(keys)
	soloKeys, extendKeys := proto.layout(keys)
	if fence != "" {
		acquireKeys = append(acquireKeys, fence)
		soloKeys = append(soloKeys, fence)
	}
	*l = core{
		proto:          proto,
		scripts:        proto.scripts(),
		reg:            proto.registration(),
		client:         client,
		name:           name,
		keys:           keys,
		acquireKeys:    acquireKeys,
		soloKeys:       soloKeys,
		extendKeys:     extendKeys,
		acquireExtra:   extraArgs,
		autoID:         !c.idGiven,
		expire:         c.expire.Truncate(time.Millisecond), // what Redis counts
		expireMS:       strconv.FormatInt(c.expire.Milliseconds(), 10),
		signalExpireMS: strconv.FormatInt(c.signalExpire.Milliseconds(), 10),
		turnMS:         turnFor(c.signalExpire),
		autoRenewal:    c.autoRenewal,
		tracking:       !c.noTracking && proto.readsOwner(),
		margin:         c.margin,
		maxHold:        c.maxHold,
		ack:            c.ack,
		maxSlice:       maxSliceFor(rt, c.expire, c.ack),
		neverHeld:      make(chan struct{}),
		turn:           make(chan struct{}, 1),
		ev:             newEvents(c.observers, c.logger),
	}
	if len(keys) == 3 { // the Lock's and the Semaphore's
		l.releaseCmd = []any{"evalsha", l.scripts.release.Hash(), "3", keys[0], keys[1], keys[2], nil, l.signalExpireMS, l.turnMS}
	}
	close(l.neverHeld)
	l.ident.Store(l.newIdentity(c.id))
}

// releaseIDArg is the id's place in core.releaseCmd.
const releaseIDArg = 6

// Name returns the lock's name, as given to New.
func (l *Lock) Name() string { return l.name }

// ID returns the owner id this Lock stores in the lock key: the one given
// with WithID, or its random one.
//
// A Lock with its own random id takes a new one whenever a release, or the
// giveback that undoes an acquire attempt, had an attempt without a reply
// (go-redis retried it, or gave up): that attempt may still reach Redis at
// any later time (a request held by a partition runs when it heals), and
// must not find, under the old id, a key this Lock acquired since. If that
// release got no reply at all, the key may still hold the old id: the next
// Release sends the old id, and until then the key keeps the lock from
// everyone, this Lock included, or until it expires. A caller-given id
// (WithID) never changes; see WithID for what that costs.
func (l *Lock) ID() string { return l.ownerID() }

// ownerID is the id this core stores (see Lock.ID).
func (l *core) ownerID() string { return l.ident.Load().id }

// identity is an owner id and the script arguments made from it once, so
// that the hot path boxes nothing.
type identity struct {
	id          string
	acquireArgs []any // ARGV of the acquire script of a try that was not woken
	acquireCmd  []any // the whole EVALSHA command of that try
	wokenArgs   []any // ARGV of the try pipelined behind a BLPOP
	wokenCmd    []any
	soloArgs    []any // ARGV of the try without the turn (KEYS soloKeys)
	soloCmd     []any
	onlyArgs    []any // ARGV of a try that will not wait, for a protocol that registers waiters
	onlyCmd     []any
}

func (l *core) newIdentity(id string) *identity {
	own := l.ownFlag()
	in := &identity{
		id:          id,
		acquireArgs: append([]any{id, l.expireMS, own, "1"}, l.acquireExtra...),
		wokenArgs:   append([]any{id, l.expireMS, own, "2"}, l.acquireExtra...),
		soloArgs:    append([]any{id, l.expireMS, own, "0"}, l.acquireExtra...),
	}
	s := l.scripts.acquire
	in.acquireCmd = wire.EvalShaCmd(s, l.acquireKeys, in.acquireArgs)
	in.wokenCmd = wire.EvalShaCmd(s, l.acquireKeys, in.wokenArgs)
	in.soloCmd = wire.EvalShaCmd(s, l.soloKeys, in.soloArgs)
	if l.reg.only() {
		in.onlyArgs = append([]any{id, l.expireMS, own, "3"}, l.acquireExtra...)
		in.onlyCmd = wire.EvalShaCmd(s, l.acquireKeys, in.onlyArgs)
	}
	return in
}

// Key returns the Redis key that holds the lock (by default "lock:"+name).
func (l *Lock) Key() string { return l.keys[0] }

// Acquire takes the lock, waiting as long as ctx allows while another owner
// holds it. It returns nil once the lock is held.
//
// While it waits it sleeps in BLPOP on the lock's signal list, so a release
// wakes it at once and a holder that died wakes it when its key expires. If
// ctx ends first, the error matches both ErrLocked and ctx's error under
// errors.Is, and the lock was not taken. It returns ErrAlreadyAcquired,
// without sending anything, if this Lock holds the lock or is acquiring it
// in another goroutine, and ErrAlreadyAcquired too if the key already holds
// this Lock's caller-given id (WithID). A Redis error is returned wrapped,
// and the lock is then not held by this Lock. An attempt whose reply was
// lost is undone when the Lock has its own random id; with WithID it
// cannot be told from another Lock's hold of the same id, so the key may
// stay held under that id until it expires or one of those Locks releases
// it (see WithID).
//
// When ctx ends while it waits, Acquire returns at once; the wait it had
// sent is finished in the background (see Settle), and a process about to
// exit calls Settle first.
//
// On success a new hold starts: Done returns a fresh open channel, and with
// WithAutoRenewal the renewal goroutine runs until Release or loss.
func (l *Lock) Acquire(ctx context.Context) error {
	_, err := l.run(ctx, true)
	return err
}

// TryAcquire takes the lock if it is free, in one round trip, without
// waiting. It returns ErrLocked when another owner holds it, and also for
// the moment (100 ms at most) after a release that woke a waiter, which
// has its turn until it takes the lock (see the README's Mixed fleets);
// its other errors are Acquire's.
func (l *Lock) TryAcquire(ctx context.Context) error {
	_, err := l.run(ctx, false)
	return err
}

// run moves the local state to acquiring, acquires, and starts the hold,
// which it returns. A hold that was lost counts as over: its Lock may
// acquire again without a Release first.
func (l *core) run(ctx context.Context, blocking bool) (*hold, error) {
	l.mu.Lock()
	prev := l.hold
	if l.state == stateAcquiring || l.state == stateReleasing || (l.state == stateHeld && !prev.ended()) {
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
		prev.retire(ctx) // a lost hold's goroutine is exiting
	}
	h, err := l.take(ctx, blocking)
	l.mu.Lock()
	if err == nil {
		l.state, l.hold = stateHeld, h
	} else {
		l.state, h = stateIdle, nil
	}
	l.mu.Unlock()
	if l.ev != nil {
		id, token := l.ownerID(), int64(0)
		if h != nil {
			id, token = h.id, h.token
		}
		l.ev.acquireEnd(ctx, l.info(id), blocking, time.Since(began), token, err, ctx.Err())
		if h != nil {
			h.announce()
		}
	}
	return h, err
}

// take acquires the lock (after any giveback still running, which could
// release what we are about to take) and starts its hold: its renewal,
// its watch.
func (l *core) take(ctx context.Context, blocking bool) (*hold, error) {
	if err := l.cleanups.Wait(ctx); err != nil {
		return nil, l.wrap(fmt.Errorf("%w: %w", ErrLocked, err))
	}
	sent, won, err := l.acquire(ctx, blocking)
	if err != nil {
		return nil, err
	}
	sent = l.freshen(ctx, sent, won.id)
	h := newHold(l, sent, won.id)
	h.token = won.token
	if l.autoRenewal {
		if err := h.startRenewal(sent); err != nil {
			h.end(err)
			l.giveBack(ctx)
			return nil, l.wrap(err)
		}
	}
	if l.tracking {
		h.setWatch(watch.Start(ctx, l.client, l.keys[0], h))
	}
	if l.autoRenewal || h.watched() {
		// A renewal goroutine and a watch are what l, dropped while
		// holding, would leave behind.
		h.cleanup = runtime.AddCleanup(l, abandon, h)
	}
	return h, nil
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

// Settle waits, as long as ctx allows, for the work this Lock still runs in
// the background: an Acquire given up while it waited in Redis (its
// context ended) returns at once, and the wait it had sent is finished
// behind it (a signal it popped is pushed back, a lock its last try took
// is released), as is the undoing of an attempt whose reply was lost. The
// Lock's next Acquire, TryAcquire and Release wait for it anyway; a
// process that gives up an Acquire and then exits calls Settle first, or
// a waiter elsewhere may sleep until its wait slice ends, or the lock stay
// taken until its expire. It returns ctx's error if ctx ends first.
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
	return fmt.Errorf("%s %q: %w", l.proto.kind(), l.name, err)
}
