package redislock

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/hold"
	"github.com/go-redis-lock/redislock/internal/wait"
	"github.com/go-redis-lock/redislock/internal/wire"
)

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
	// plainWake: a woken waiter takes the lock with a plain SET NX (see
	// identity.wokenSet): the Lock's, without fencing or replica ack.
	plainWake bool

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
	maxSlice       time.Duration  // longest single BLPOP
	probeWait      time.Duration  // how long Redis has to answer a probe (see answers): the read timeout
	neverHeld      chan struct{}  // closed; Done before the first acquire
	cleanups       *wait.Cleanups // giveback scripts still running (a Semaphore's permits share its)
	abandons       *wait.Cleanups // abandoned waits still being finished (also in cleanups)
	turn           chan struct{}  // the local mutex (see queued, and Locker): one slot
	// queued: Acquire takes turn first, and the Release of its hold gives
	// it back (the Lock's sync.Mutex behaviour); otherwise only Locker
	// uses turn.
	queued  bool
	ev      *events       // observers and logger; nil: none
	turnLen time.Duration // the turn (see turnFor)

	// handedOff is when (Unix ns) the turn of the waiter woken by this
	// Lock's last release ends, when that release was a hand-off under
	// contention (see release.lua): a waiter had taken the last signal and
	// another owner had held the lock since our previous release, so a
	// waiter is likely to take this signal and the lock with it. Until
	// then the next blocking Acquire waits its turn behind that waiter, in
	// BLPOP, instead of trying first: its try would find the lock taken
	// (or the woken waiter's turn) and cost a round trip and four commands
	// for nothing. Swapped to 0 by the Acquire that reads it.
	handedOff atomic.Int64

	// mu guards the fields below. Under it the only call into the hold is
	// a look at its Done channel, and nothing of wait or watch is called
	// (see DESIGN.md, Lock order).
	mu         sync.Mutex
	state      lockState
	hold       *hold.Hold // the current or last acquisition; nil before the first
	turnHold   *hold.Hold // the hold that has the Lock's turn (queued); nil when none
	unreleased string     // an earlier id whose release got no reply; see afterRelease
}

// lockState is what this Lock value believes; Redis has the last word.
type lockState int

const (
	stateIdle      lockState = iota // not held by this Lock
	stateAcquiring                  // an Acquire or TryAcquire is running
	stateHeld                       // acquired and not yet released
	stateReleasing                  // a Release of the hold is running
)

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
		turnLen:        turnDuration(c.signalExpire),
		autoRenewal:    c.autoRenewal,
		tracking:       !c.noTracking && proto.readsOwner(),
		margin:         c.margin,
		maxHold:        c.maxHold,
		ack:            c.ack,
		maxSlice:       maxSliceFor(rt, c.expire, c.ack),
		probeWait:      probeWaitFor(rt),
		neverHeld:      make(chan struct{}),
		cleanups:       new(wait.Cleanups),
		abandons:       new(wait.Cleanups),
		turn:           make(chan struct{}, 1),
		ev:             newEvents(c.observers, c.logger),
	}
	_, isLock := proto.(lockProtocol)
	l.plainWake = isLock && fence == "" && !c.ack.on()
	if len(keys) == 3 { // the Lock's and the Semaphore's
		l.releaseCmd = []any{"evalsha", l.scripts.release.Hash(), "3", keys[0], keys[1], keys[2], nil, l.signalExpireMS, l.turnMS}
	}
	close(l.neverHeld)
	l.ident.Store(l.newIdentity(c.id))
}

// releaseIDArg is the id's place in core.releaseCmd.
const releaseIDArg = 6

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
	// wokenSet is the try pipelined behind a BLPOP when plainWake: SET
	// lock id NX [PX expire], python-redis-lock's own acquire. Such a try
	// takes a free lock whatever the turn (as the script's mode "2" does)
	// in one command instead of two (EVALSHA and its SET). When it finds
	// the lock taken, the script is sent after it, for the holder's PTTL
	// (see afterRound).
	wokenSet []any
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
	if l.plainWake {
		in.wokenSet = []any{"set", l.keys[0], id, "nx"}
		if l.expireMS != "0" {
			in.wokenSet = append(in.wokenSet, "px", l.expireMS)
		}
	}
	if l.reg.only() {
		in.onlyArgs = append([]any{id, l.expireMS, own, "3"}, l.acquireExtra...)
		in.onlyCmd = wire.EvalShaCmd(s, l.acquireKeys, in.onlyArgs)
	}
	return in
}
