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

	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/watch"
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
	proto        *protocol // the primitive's scripts and what it supports
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
	cleanups       cleanups      // giveback scripts still running
	abandons       cleanups      // abandoned waits still being finished (also in cleanups)
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
	ks := newKeyScheme(c.prefix, tagged)
	if err := ks.checkName(name); err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	keys := []string{ks.lockKey(name), ks.signalKey(name), ks.turnKey(name)}
	var fence string
	if c.fencing {
		fence = ks.fenceKey(name)
	}
	l := &Lock{}
	l.core.init(client, name, &lockProtocol, c, rt, keys, fence, nil)
	return l, nil
}

// init sets up a new core for the primitive proto, named name, with the
// checked config c on client (whose read timeout is rt). keys are the
// KEYS of its release and giveback scripts: the primitive's main key, its
// signal list, and a third key of its own (the Lock's turn key); fence is
// the fence key, "" without fencing; extraArgs follow the four ARGV of
// every try.
func (l *core) init(client redis.UniversalClient, name string, proto *protocol, c config, rt time.Duration, keys []string, fence string, extraArgs []any) {
	acquireKeys, soloKeys := slices.Clone(keys), keys[:1:1]
	if proto.solo != nil {
		soloKeys = proto.solo(keys)
	}
	if fence != "" {
		acquireKeys = append(acquireKeys, fence)
		soloKeys = append(soloKeys, fence)
	}
	*l = core{
		proto:          proto,
		client:         client,
		name:           name,
		keys:           keys,
		acquireKeys:    acquireKeys,
		soloKeys:       soloKeys,
		extendKeys:     proto.extendKeys(keys),
		acquireExtra:   extraArgs,
		autoID:         !c.idGiven,
		expire:         c.expire.Truncate(time.Millisecond), // what Redis counts
		expireMS:       strconv.FormatInt(c.expire.Milliseconds(), 10),
		signalExpireMS: strconv.FormatInt(c.signalExpire.Milliseconds(), 10),
		turnMS:         turnFor(c.signalExpire),
		autoRenewal:    c.autoRenewal,
		tracking:       !c.noTracking && proto.readsKey,
		margin:         c.margin,
		maxHold:        c.maxHold,
		ack:            c.ack,
		maxSlice:       maxSliceFor(rt, c.expire, c.ack),
		neverHeld:      make(chan struct{}),
		turn:           make(chan struct{}, 1),
		ev:             newEvents(c.observers, c.logger),
	}
	if len(keys) == 3 { // the Lock's and the Semaphore's
		l.releaseCmd = []any{"evalsha", proto.release.Hash(), "3", keys[0], keys[1], keys[2], nil, l.signalExpireMS, l.turnMS}
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
	s := l.proto.acquire
	in.acquireCmd = evalShaCmd(s, l.acquireKeys, in.acquireArgs)
	in.wokenCmd = evalShaCmd(s, l.acquireKeys, in.wokenArgs)
	in.soloCmd = evalShaCmd(s, l.soloKeys, in.soloArgs)
	if l.proto.registers {
		in.onlyArgs = append([]any{id, l.expireMS, own, "3"}, l.acquireExtra...)
		in.onlyCmd = evalShaCmd(s, l.acquireKeys, in.onlyArgs)
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
	// A giveback still running could release what we are about to take.
	var (
		sent time.Time
		won  acquireResult
	)
	err := l.cleanups.wait(ctx)
	if err != nil {
		err = l.wrap(fmt.Errorf("%w: %w", ErrLocked, err))
	} else {
		sent, won, err = l.acquire(ctx, blocking)
	}
	if err == nil {
		sent = l.freshen(ctx, sent, won.id)
	}
	var h *hold
	if err == nil {
		h = newHold(l, sent, won.id)
		h.token = won.token
		if l.autoRenewal {
			err = h.startRenewal(sent)
		}
		if err != nil {
			h.end(err)
			l.giveBack(ctx)
			err = l.wrap(err)
		} else {
			if l.tracking {
				h.setWatch(watch.Start(ctx, l.client, l.keys[0], h))
			}
			if l.autoRenewal || h.watched() {
				// A renewal goroutine and a watch are what l, dropped
				// while holding, would leave behind.
				h.cleanup = runtime.AddCleanup(l, abandon, h)
			}
		}
	}

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
	if l.expire == 0 || time.Since(sent) < l.expire/2 || !l.proto.readsKey {
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
	err := l.cleanups.wait(ctx)
	if err == nil {
		return nil
	}
	return l.wrap(fmt.Errorf("settle: %w", err))
}

// Release deletes the lock key if it holds this Lock's id and wakes one
// waiter. It works from any Lock with the same name and id, not only the
// one that acquired. It returns ErrNotAcquired, changing nothing, when the
// key holds another id, or is missing while this Lock has no hold that
// vouches for it (the lock expired, was reset, or was never taken). When
// another goroutine is acquiring or releasing on this Lock at the same
// time, Release returns ErrNotAcquired without sending anything: the
// acquisition under way is not the caller's to release. After Release
// returns, whatever its result, this Lock may Acquire again.
//
// A release whose reply was lost is retried by go-redis, and the retry
// finds the key gone, or taken by the waiter the first attempt woke. So
// when go-redis had to send the release more than once, and this Lock's
// hold had not ended, nor its local deadline (see Done) passed, when it was
// sent, a key that is missing or holds another id counts as released:
// until then the key cannot have expired, so it was our own first attempt
// that freed it. Without a retry such a key is ErrNotAcquired (after a
// Reset, say).
//
// A retry is counted on *redis.Client, *redis.ClusterClient and
// *redis.Ring, which encode each argument once per attempt; on other
// clients a release is never taken for retried. go-redis also retries
// after some error replies (LOADING, READONLY, TRYAGAIN, CLUSTERDOWN,
// MOVED): such a retry is counted too, though the first attempt ran
// nothing, so a key lost in a failover in the same window may be reported
// as released.
//
// Release first tells this Lock's auto-renewal to stop (a renewal already
// sent is not waited for: go-redis cannot abort a blocked read) and, after
// the release, waits for the renewal goroutine to exit, as long as ctx
// allows; then Done is closed and Err returns ErrReleased (or, if the key
// was no longer ours, the loss).
func (l *Lock) Release(ctx context.Context) error {
	return l.release(ctx, nil)
}

// release is Release of the hold want, or of whatever this Lock holds when
// want is nil. For a want that is no longer this Lock's current hold (it
// was lost and the Lock acquired again), or is being released, it sends
// nothing and returns ErrNotAcquired.
func (l *core) release(ctx context.Context, want *hold) (result error) {
	l.mu.Lock()
	var h *hold
	switch {
	case l.state == stateHeld && (want == nil || l.hold == want):
		h = l.hold
	case l.state != stateIdle || want != nil:
		// Another goroutine is acquiring or releasing, or want is over.
		l.mu.Unlock()
		return l.wrap(ErrNotAcquired)
	}
	// Releasing, also from idle: until the reply is in, an Acquire on this
	// Lock would take a key under the id this release may delete.
	before := l.state
	l.state = stateReleasing
	l.mu.Unlock()
	outcome := OutcomeError
	if l.ev != nil {
		in := l.info(l.releaseID(h))
		ctx = l.observeStart(before, func() context.Context { return l.ev.releaseStart(ctx, in) })
		if h != nil && h.renewalDone() != nil {
			l.ev.renewalShutdown(h)
		}
		defer func() {
			var held time.Duration
			if h != nil {
				held = time.Since(h.start)
			}
			l.ev.releaseEnd(ctx, in, held, outcome, result)
		}()
	}
	defer func() {
		if h != nil {
			h.retire(ctx)
		}
		l.mu.Lock()
		l.state = stateIdle
		l.mu.Unlock()
	}()
	if err := l.cleanups.wait(ctx); err != nil {
		if h != nil {
			h.end(lost(fmt.Errorf("%w: the release was not sent: %w", ErrUnreachable, err)))
		}
		return l.wrap(fmt.Errorf("release: %w", err))
	}
	if h != nil {
		// Stop renewing and watching before the release is sent: a
		// renewal that answers after it, or the invalidation of our own
		// DEL, must not be read as a loss. A renewal still in flight is
		// harmless: an extend never recreates a key.
		h.signalStop()
		h.unwatch()
	}

	vouched := h != nil && h.valid()
	id := l.releaseID(h)
	n, retried, unanswered, err := l.sendRelease(ctx, id)
	l.afterRelease(id, unanswered, err)
	noReply := err != nil && !topology.IsReply(err)
	if !countsRetries(l.client) {
		retried = false // unknown client: a retry cannot be told from an extra encoding
	}
	var reason error
	switch {
	case err != nil && !noReply:
		// An error reply: the script did not run, and the key still holds
		// our id until it expires or a later Release gets through.
		reason = fmt.Errorf("%w: the release was refused: %w", ErrUnreachable, err)
		err = fmt.Errorf("release: %w", err)
	case err != nil:
		err = fmt.Errorf("release: %w", err)
	case n != releaseDone && retried && vouched:
		// Our own release ran, and its reply was lost: go-redis's retry
		// found the key gone, or already taken by the waiter it woke.
	case n == releaseMissing:
		err, reason = ErrNotAcquired, ErrExpired
	case n != releaseDone:
		err, reason = ErrNotAcquired, ErrTakenOver
	}
	switch {
	case err == nil:
		outcome = OutcomeReleased
	case errors.Is(err, ErrNotAcquired) && errors.Is(reason, ErrExpired):
		outcome = OutcomeExpired
	case errors.Is(err, ErrNotAcquired):
		outcome = OutcomeTakenOver
	}
	if h != nil {
		switch {
		case reason != nil:
			h.end(lost(reason))
		case noReply:
			// Neither held nor released, as far as we can tell: the key
			// may be ours until a Release that is answered, or its expire.
			h.end(lost(fmt.Errorf("%w: the release got no reply: %w", ErrUnreachable, err)))
		default:
			h.end(ErrReleased)
		}
	}
	if err != nil {
		return l.wrap(err)
	}
	return nil
}

// releaseID is the id a release of h sends: the hold's own; else one
// whose release got no reply before (this Lock has a fresh id since); else
// this Lock's.
func (l *core) releaseID(h *hold) string {
	if h != nil {
		return h.id
	}
	if p := l.unreleasedID(); p != "" {
		return p
	}
	return l.ownerID()
}

// sendRelease runs the release script. retried reports whether go-redis
// sent the command that answered more than once (a retry after a lost
// reply: an earlier attempt may have run); unanswered whether any attempt,
// of the EVALSHA or of the EVAL after a NOSCRIPT, went without a reply and
// may yet run.
//
// A topology reply (TRYAGAIN for the whole time the lock's slot migrates:
// the script touches two keys) is retried within ctx (see topology.Do).
func (l *core) sendRelease(ctx context.Context, own string) (n int64, retried, unanswered bool, err error) {
	r := topology.Retry{Patience: topologyPatience}
	for {
		sha := &countedArg{s: own}
		if l.releaseCmd != nil { // built once: a copy with the id is all a send allocates
			cmd := slices.Clone(l.releaseCmd)
			cmd[releaseIDArg] = sha
			n, err = l.client.Do(ctx, cmd...).Int64()
		} else {
			n, err = l.client.Do(ctx, evalShaCmd(l.proto.release, l.keys, []any{sha, l.signalExpireMS, l.turnMS})...).Int64()
		}
		final := sha
		if isNoScript(err) {
			// Not cached: EVAL caches it. The EVALSHA ran nothing.
			final = &countedArg{s: own}
			n, err = l.proto.release.Eval(ctx, l.client, l.keys, final, l.signalExpireMS, l.turnMS).Int64()
		}
		retried = final.sends.Load() > 1
		unanswered = unanswered || retried || sha.sends.Load() > 1
		if !r.Again(ctx, l.client, err) {
			return n, retried, unanswered, err
		}
	}
}

// afterRelease records the outcome of a release of id: when an attempt of
// it got no reply, it may still reach Redis much later and delete whatever
// key holds id then, so a Lock with its own random id takes a fresh one,
// out of its reach; and when the release as a whole got no reply, or was
// refused (an error reply), the key may still hold id, which the next
// Release then sends, while the next Acquire takes a fresh id.
func (l *core) afterRelease(id string, unanswered bool, err error) {
	if !l.autoID {
		return
	}
	if unanswered || err != nil {
		l.renewID()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil: // no reply, or refused (the key may hold id still)
		l.unreleased = id
	case l.unreleased == id:
		l.unreleased = ""
	}
}

// unreleasedID returns the id of a release that got no reply, if any.
func (l *core) unreleasedID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unreleased
}

// countsRetries reports whether client encodes each command argument once
// per attempt, so that countedArg counts retries. Other implementations
// of redis.UniversalClient (go-redis's AutoPipeliner, wrappers) may encode
// an argument more than once without retrying.
func countsRetries(client redis.UniversalClient) bool {
	switch client.(type) {
	case *redis.Client, *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

// renewID gives a Lock with its own random id a fresh one (see ID).
func (l *core) renewID() {
	l.ident.Store(l.newIdentity(newOwnerID()))
}

// countedArg is a command argument that counts how often go-redis writes
// it to a connection (go-redis encodes an encoding.BinaryMarshaler on every
// write): more than once means the command was retried.
type countedArg struct {
	s     string
	sends atomic.Int32
}

func (a *countedArg) MarshalBinary() ([]byte, error) {
	a.sends.Add(1)
	return []byte(a.s), nil
}

// Replies of the release script.
const (
	releaseDone    = 0 // deleted our key and pushed the signal
	releaseMissing = 1 // no key
	releaseOther   = 2 // the key holds another id
)

// Extend sets the lock key's expire to d from now, if the key holds this
// Lock's id; it works from any Lock with the same name and id. A d of 0
// means this Lock's own expire (WithExpire), as python-redis-lock's
// extend() without an argument.
//
// It returns ErrInvalidDuration, with nothing sent, for a negative d, one
// below 1ms, 0 on a Lock without expire, or one not longer than the safety
// margin (WithSafetyMargin: the hold would count as lost at once); ErrNotAcquired when the key is
// missing or holds another id; and ErrNotExpirable when the key has no
// expire. In those cases the key is unchanged, and a missing key is never
// recreated. With WithReplicaAck it returns ErrNotReplicated when the new
// expire was set on the master but too few replicas acknowledged it in
// time; the lock is then still held, with its local deadline unchanged.
//
// A successful Extend of the hold this Lock acquired also moves its local
// deadline (see Done). Under WithAutoRenewal, renewals never shorten what
// Extend set: each renews to the longer of the expire and what is left of
// the Extend, so Extend(ctx, time.Hour) keeps the key alive for at least
// the hour even if renewals then fail. An Extend shorter than the expire
// lasts until the next renewal. WithMaxHold does not cap an Extend.
func (l *Lock) Extend(ctx context.Context, d time.Duration) error {
	return l.extend(ctx, d)
}

// extend is Extend, for every primitive.
func (l *core) extend(ctx context.Context, d time.Duration) error {
	if d == 0 {
		d = l.expire
	}
	if d < time.Millisecond || d <= l.margin {
		return l.wrap(ErrInvalidDuration)
	}
	d = d.Truncate(time.Millisecond) // what Redis counts
	// The hold this extend is for, taken before it is sent: its reply must
	// not move the deadline of a later hold.
	h := l.current()
	if h != nil && !h.ended() {
		// One extend of a hold in flight at a time (see hold.extending).
		select {
		case h.extending <- struct{}{}:
			defer func() { <-h.extending }()
		case <-h.done:
		case <-ctx.Done():
			return l.wrap(fmt.Errorf("extend: %w", ctx.Err()))
		}
	}
	ms := strconv.FormatInt(d.Milliseconds(), 10)
	id := l.ownerID()
	if l.ev != nil {
		ctx = l.ev.extendStart(ctx, l.info(id), false, d)
	}
	sent := time.Now()
	if h != nil {
		h.expectBegin()
	}
	cmd, ackErr := l.ack.run(ctx, l.client, l.proto.extend, l.extendKeys, id, ms)
	n, err := cmd.Int64()
	topology.NoteConnError(ctx, l.client, err)
	if h != nil {
		h.expectEnd(err == nil && n == 0)
	}
	if l.ev != nil {
		eerr := err
		if err == nil && n == 0 && ackErr != nil {
			eerr = ackErr
		}
		l.ev.extendEnd(ctx, l.info(id), false, d, n, eerr, 0, false)
	}
	if err == nil && n == 0 && ackErr != nil {
		return l.wrap(ackErr)
	}
	if err == nil && n == 0 && h != nil {
		h.extendedBy(sent, d)
	}
	switch {
	case err != nil:
		return l.wrap(fmt.Errorf("extend: %w", err))
	case n == 1 || n == 3:
		return l.wrap(ErrNotAcquired)
	case n == 2:
		return l.wrap(ErrNotExpirable)
	}
	return nil
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
	return fmt.Errorf("%s %q: %w", l.proto.kind, l.name, err)
}
