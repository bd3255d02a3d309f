package redislock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/hold"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// An RWMutex is a reader/writer lock in Redis, the distributed form of
// sync.RWMutex: any number of readers, or one writer, at a time, across
// every process that uses the same Redis and key prefix.
//
// An RWMutex is shared by goroutines as a sync.RWMutex is: they read
// together and write alone. RLock returns a read Permit of its own (with
// its own owner id, expiry, renewal and loss; its Release is the
// RUnlock), so that readers of one process hold side by side; Lock takes
// the write hold, which the value holds once at a time, as a Lock does
// (Done, Err, Extend and Token are the write hold's).
//
// Writers are preferred as in sync.RWMutex: once a writer waits, new
// readers wait too; the readers that were waiting when a writer releases
// come in before the next writer (for at most the signal expire, should
// one of them not come), so neither side starves. Nobody polls: waiters
// sleep in BLPOP on a list of their side, and are woken by the release
// that lets them in, or by the expiry of what holds them up.
//
// Each reader's hold has its own expiry on the Redis server's clock (a
// sorted set of readers, as a semaphore's holders): a reader that crashed
// holds writers up only until its own expire. The writer's hold is a key
// holding its id, as the Lock's. Its keys are its own, all hash-tagged
// with the name (one cluster slot).
type RWMutex struct {
	w core // first: the writer's cleanup (see run) is attached to the RWMutex's address
	r core // the readers' side: what each read permit's core is made of (see RLock)

	cfg   config
	rt    time.Duration
	fence string
	reg   []any
}

// NewRWMutex returns an RWMutex named name on client. It sends nothing to
// Redis: it checks its arguments as NewSemaphore does (an expire of 0 is
// refused, the default is DefaultExpire; a name with '}' is refused). The
// options are the Lock's but for WithHashTag (the keys are always tagged),
// which is refused with an error matching ErrInvalidArgument; WithTracking
// applies to the writer's hold only (a reader learns of a loss at its
// renewal or local deadline). With WithID the writer and every reader
// hold under that id, so that one reader holds at a time (another RLock
// returns ErrAlreadyAcquired).
func NewRWMutex(client redis.UniversalClient, name string, opts ...Option) (*RWMutex, error) {
	c, rt, ks, err := familyConfig(client, name, "rwmutex", opts, "WithHashTag")
	if err != nil {
		return nil, err
	}
	keys, fence := ks.RWKeys(name)
	if !c.fencing {
		fence = ""
	}
	// A waiting registration lasts a slice and a second: the waiter renews
	// it with the try after each slice.
	reg := []any{strconv.FormatInt((maxSliceFor(rt, c.expire, c.ack) + time.Second).Milliseconds(), 10)}
	// Each side's keys start with its own key and its own signal list.
	w, sw, r, q, sr, wr, a := keys[0], keys[1], keys[2], keys[3], keys[4], keys[5], keys[6]
	rw := &RWMutex{cfg: c, rt: rt, fence: fence, reg: reg}
	rw.w.init(client, name, rwWriteProtocol{}, c, rt, []string{w, sw, r, q, sr, wr, a}, fence, reg)
	// A waiting reader registers by its local queue's token, the last
	// ARGV of its tries (see core.prepared, internal/wire/lua/rw_racquire.lua).
	rw.r.init(client, name, rwReadProtocol{}, c, rt, []string{r, sr, w, q, sw, wr, a}, fence, reg)
	// The third ARGV of their release and giveback, the Lock's turn, is
	// how long the readers admitted at a writer's release hold writers
	// back: as long as a waiting registration lasts.
	rw.w.turnMS, rw.r.turnMS = reg[0].(string), reg[0].(string)
	rw.w.queued = true // goroutines take turns at the write hold, as at a Lock's
	return rw, nil
}

// familyConfig checks the arguments of NewSemaphore and NewRWMutex and
// returns the checked config, the client's read timeout and the (tagged)
// key scheme. kind names the primitive in errors;
// ignores are the options it does nothing with, refused.
func familyConfig(client redis.UniversalClient, name, kind string, opts []Option, ignores ...string) (config, time.Duration, wire.Scheme, error) {
	wrap := func(err error) error { return fmt.Errorf("%s %q: %w", kind, name, err) }
	if isNil(client) {
		return config{}, 0, wire.Scheme{}, wrap(ErrNilClient)
	}
	if err := checkClient(client); err != nil {
		return config{}, 0, wire.Scheme{}, wrap(err)
	}
	if name == "" {
		return config{}, 0, wire.Scheme{}, wrap(errInvalidName)
	}
	c := newConfig(opts)
	if err := c.ignoring("a "+kind, ignores...); err != nil { // its keys are always hash-tagged; a semaphore's holders are not watched
		return config{}, 0, wire.Scheme{}, wrap(err)
	}
	if c.expire < time.Millisecond {
		return config{}, 0, wire.Scheme{}, wrap(fmt.Errorf("%w %v: holds of a %s must expire, after 1ms or more", errInvalidExpire, c.expire, kind))
	}
	if err := c.validate(); err != nil {
		return config{}, 0, wire.Scheme{}, wrap(err)
	}
	rt := readTimeout(client)
	if err := c.ack.fits(rt); err != nil {
		return config{}, 0, wire.Scheme{}, wrap(err)
	}
	ks := wire.NewScheme(c.prefix, true)
	if err := checkName(ks, name); err != nil {
		return config{}, 0, wire.Scheme{}, wrap(err)
	}
	return c, rt, ks, nil
}

// The RWMutex's two sides (see internal/wire/lua/rw_*.lua). The writer's key is the
// Lock's kind of key, renewed by the Lock's extend script; the readers are
// a semaphore's kind of holders, renewed by its extend script (their set
// has no size key: it stands in for it).
type (
	rwWriteProtocol struct{}
	rwReadProtocol  struct{}
)

func (rwWriteProtocol) kind() string { return "rwmutex" }
func (rwWriteProtocol) ref() Kind    { return KindWriter }
func (rwWriteProtocol) scripts() scripts {
	return scripts{wire.RWWAcquire, wire.RWWRelease, wire.Extend, wire.RWWGiveback}
}
func (rwWriteProtocol) layout(keys []string) (solo, extend []string) { return keys, keys[:1:1] } // one slot
func (rwWriteProtocol) readsOwner() bool                             { return true }
func (rwWriteProtocol) shared() bool                                 { return false }
func (rwWriteProtocol) registration() registration {
	return ownRegistration{leave: wire.RWWLeave}
}

func (rwReadProtocol) kind() string { return "rwmutex" }
func (rwReadProtocol) ref() Kind    { return KindReader }
func (rwReadProtocol) scripts() scripts {
	return scripts{wire.RWRAcquire, wire.RWRRelease, wire.SemExtend, wire.RWRGiveback}
}
func (rwReadProtocol) layout(keys []string) (solo, extend []string) {
	return keys, []string{keys[0], keys[0]}
}
func (rwReadProtocol) readsOwner() bool { return false }
func (rwReadProtocol) shared() bool     { return true }
func (rwReadProtocol) registration() registration {
	return queueRegistration{leave: wire.RWRLeave}
}

// Name returns the RWMutex's name.
func (rw *RWMutex) Name() string { return rw.w.name }

// ID returns the owner id of the write hold: a random one, which changes
// as Lock.ID's does, or the one given with WithID. Each read Permit has
// its own (Permit.ID).
func (rw *RWMutex) ID() string { return rw.w.ownerID() }

// Key returns the writer key: it holds the writer's id while one holds.
func (rw *RWMutex) Key() string { return rw.w.keys[0] }

// Lock takes the mutex for writing, waiting as long as ctx allows while
// readers or another writer hold it; while it waits, new readers wait too.
// Goroutines that share rw take turns at the write hold as at a Lock's
// (see Lock). Its errors are Lock.Acquire's.
func (rw *RWMutex) Lock(ctx context.Context) error {
	_, err := rw.w.runQueued(ctx, true)
	return err
}

// TryLock takes the mutex for writing if nobody holds it and no reader
// admitted after the last writer is still to come in, in one round trip;
// else it returns ErrLocked, as it does at once while another goroutine
// holds or takes the write hold through rw.
func (rw *RWMutex) TryLock(ctx context.Context) error {
	_, err := rw.w.runQueued(ctx, false)
	return err
}

// Unlock releases the write hold and lets in the readers that were
// waiting, or else wakes one writer. It returns ErrNotAcquired, changing
// nothing, when the writer key no longer holds the write hold's id (the
// hold was lost: the next Lock may then go ahead).
func (rw *RWMutex) Unlock(ctx context.Context) error {
	err, _ := rw.w.releaseTurn(ctx, false)
	return err
}

// RLock takes the mutex for reading, waiting as long as ctx allows while a
// writer holds it or waits for it (unless this reader was waiting when the
// last writer released: it then comes in before the next writer), and
// returns the read Permit: its Release is the RUnlock. Its errors are
// Lock.Acquire's; the Permit is nil with an error.
func (rw *RWMutex) RLock(ctx context.Context) (*Permit, error) {
	p, _, err := rw.reader(ctx, true)
	return p, err
}

// TryRLock takes the mutex for reading if no writer holds it or waits for
// it, in one round trip; else it returns ErrLocked.
func (rw *RWMutex) TryRLock(ctx context.Context) (*Permit, error) {
	p, _, err := rw.reader(ctx, false)
	return p, err
}

// reader acquires a new read permit, and returns it with its hold.
func (rw *RWMutex) reader(ctx context.Context, blocking bool) (*Permit, *hold.Hold, error) {
	c := rw.cfg
	if !c.idGiven {
		c.id = newOwnerID() // each reader holds under an id of its own
	}
	p := &Permit{}
	p.core.init(rw.r.client, rw.r.name, rwReadProtocol{}, c, rw.rt, rw.r.keys, rw.fence, rw.reg)
	p.turnMS = rw.r.turnMS
	p.cleanups, p.abandons = rw.r.cleanups, rw.r.abandons // rw's Settle waits for them
	h, err := p.run(ctx, blocking)
	if err != nil {
		return nil, nil, err
	}
	return p, h, nil
}

// Done returns a channel closed when the write hold ends, as Lock.Done; a
// closed channel before the first. A read Permit has its own.
func (rw *RWMutex) Done() <-chan struct{} { return rw.w.done() }

// Err returns nil while the write hold lasts and why it ended after, as
// Lock.Err; ErrNotAcquired before the first.
func (rw *RWMutex) Err() error { return rw.w.holdErr() }

// Token returns the fencing token of the current or last write hold with
// WithFencing: reads and writes draw from one sequence, so a write's token
// is above every earlier read's and write's. 0 without WithFencing.
func (rw *RWMutex) Token() int64 { return rw.w.token() }

// Extend sets the write hold to expire d from now (0: the RWMutex's
// expire), as Lock.Extend does.
func (rw *RWMutex) Extend(ctx context.Context, d time.Duration) error {
	return rw.w.extend(ctx, d)
}

// Settle waits, as long as ctx allows, for the work the writer and the
// read permits still run in the background (see Lock.Settle).
func (rw *RWMutex) Settle(ctx context.Context) error {
	if err := rw.w.settle(ctx); err != nil {
		return err
	}
	return rw.r.settle(ctx)
}

// Do takes the mutex for writing (as Lock does), runs fn while holding it
// and releases it, even if fn panics; fn's context is cancelled with a
// cause matching ErrLost if the hold is lost. Its results are Lock.Do's.
func (rw *RWMutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	h, err := rw.w.runQueued(ctx, true)
	if err != nil {
		return err
	}
	defer rw.w.giveTurn(h)
	return rw.w.runHeld(ctx, h, fn)
}

// RDo is Do for reading, on a read permit of its own.
func (rw *RWMutex) RDo(ctx context.Context, fn func(ctx context.Context) error) error {
	p, h, err := rw.reader(ctx, true)
	if err != nil {
		return err
	}
	return p.runHeld(ctx, h, fn)
}

// Locker returns a sync.Locker whose Lock and Unlock take and release the
// mutex for writing, as Lock.Locker does for a Lock (no deadline, Redis
// errors retried, a panic on an Unlock of a hold that is gone).
func (rw *RWMutex) Locker() sync.Locker {
	first := func(ctx context.Context) (error, func()) { return rw.w.releaseTurn(ctx, true) }
	return locker{c: &rw.w, acquire: rw.Lock, release: rw.Unlock, firstRelease: first, err: rw.Err}
}
