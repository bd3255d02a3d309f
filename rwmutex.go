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
// An RWMutex value is one participant: it holds the mutex for reading or
// for writing, one hold at a time (Lock or RLock while it holds returns
// ErrAlreadyAcquired); goroutines that each need a hold use an RWMutex
// each for the same name, or share one through Locker and RLocker, which
// take turns locally.
//
// Writers are preferred as in sync.RWMutex: once a writer waits, new
// readers wait too; the readers that were waiting when a writer releases
// come in before the next writer (for at most the signal expire, should
// one of them not come), so neither side starves. Nobody polls: waiters
// sleep in BLPOP on a list of their side, and are woken by the release
// that lets them in, or by the expiry of what holds them up.
//
// Each reader's hold has its own expiry on the Redis server's clock (a
// sorted set of readers, as a semaphore's holders), renewed with
// WithAutoRenewal on its own: a reader that crashed holds writers up only
// until its own expire. The writer's hold is a key holding its id, as the
// Lock's.
//
// It runs on the same machinery as the Lock (waiting, local queue, holds
// with Done/Err and the local deadline, renewal and loss, giveback after
// a lost reply, fencing, replica acknowledgement); its keys are its own,
// all hash-tagged with the name (one cluster slot).
type RWMutex struct {
	w core // first: the writer's cleanup (see run) is attached to the RWMutex's address
	r core

	// mu guards the fields below; a side's mu may be taken under it,
	// never the other way round.
	mu   sync.Mutex
	busy *core // the side claimed by a call under way or a hold; nil: none
	last *core // the side of the current or last hold; nil before the first
}

// NewRWMutex returns an RWMutex named name on client. It sends nothing to
// Redis: it checks its arguments as NewSemaphore does (an expire of 0 is
// refused, the default is DefaultExpire; a name with '}' is refused). The
// options are the Lock's but for WithHashTag (the keys are always tagged),
// which is refused with an error matching ErrInvalidArgument; WithTracking
// applies to the writer's hold only (a reader learns of a loss at its
// renewal or local deadline).
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
	rw := &RWMutex{}
	rw.w.init(client, name, rwWriteProtocol{}, c, rt, []string{w, sw, r, q, sr, wr, a}, fence, reg)
	// A waiting reader registers by its local queue's token, the last
	// ARGV of its tries (see core.prepared, internal/wire/lua/rw_racquire.lua).
	rw.r.init(client, name, rwReadProtocol{}, c, rt, []string{r, sr, w, q, sw, wr, a}, fence, reg)
	// The third ARGV of their release and giveback, the Lock's turn, is
	// how long the readers admitted at a writer's release hold writers
	// back: as long as a waiting registration lasts.
	rw.w.turnMS, rw.r.turnMS = reg[0].(string), reg[0].(string)
	rw.r.turn = rw.w.turn // one participant: Locker and RLocker take turns together
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

// ID returns the owner id this participant holds under (its writer's; a
// random id changes as Lock.ID's does, for each side on its own).
func (rw *RWMutex) ID() string { return rw.w.ownerID() }

// Key returns the writer key: it holds the writer's id while one holds.
func (rw *RWMutex) Key() string { return rw.w.keys[0] }

// ReadersKey returns the key of the readers: a sorted set of reader ids,
// each scored by its expiry in milliseconds of the server's clock.
func (rw *RWMutex) ReadersKey() string { return rw.r.keys[0] }

// claim reserves side c of the participant for a call, or returns
// ErrAlreadyAcquired when the other side holds or is under way. A side
// whose hold was lost (ended without Unlock) no longer counts.
func (rw *RWMutex) claim(c *core) error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if b := rw.busy; b != nil && b != c {
		b.mu.Lock()
		lost := b.state == stateHeld && b.hold.Ended()
		b.mu.Unlock()
		if !lost {
			return c.wrap(ErrAlreadyAcquired)
		}
	}
	rw.busy = c
	return nil
}

// unclaim gives up the claim of side c, if it still has it.
func (rw *RWMutex) unclaim(c *core) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.busy == c {
		rw.busy = nil
	}
}

// take acquires side c, blocking or not, and starts its hold.
func (rw *RWMutex) take(ctx context.Context, c *core, blocking bool) (*hold.Hold, error) {
	if err := rw.claim(c); err != nil {
		return nil, err
	}
	h, err := c.run(ctx, blocking)
	rw.mu.Lock()
	if err == nil {
		rw.last = c
	} else if rw.busy == c {
		c.mu.Lock()
		// Not when c holds (an earlier hold still on) or another call on
		// c is under way (this one was refused with ErrAlreadyAcquired).
		idle := c.state == stateIdle
		c.mu.Unlock()
		if idle {
			rw.busy = nil
		}
	}
	rw.mu.Unlock()
	return h, err
}

// give releases side c.
func (rw *RWMutex) give(ctx context.Context, c *core) error {
	err := c.release(ctx, nil)
	c.mu.Lock()
	idle := c.state == stateIdle
	c.mu.Unlock()
	if idle {
		rw.unclaim(c)
	}
	return err
}

// Lock takes the mutex for writing, waiting as long as ctx allows while
// readers or another writer hold it; while it waits, new readers wait too.
// Its errors are Lock.Acquire's: when ctx ends the error matches ErrLocked
// and ctx's error; ErrAlreadyAcquired, with nothing sent, when this
// participant holds (for reading or writing) or is acquiring.
func (rw *RWMutex) Lock(ctx context.Context) error {
	_, err := rw.take(ctx, &rw.w, true)
	return err
}

// TryLock takes the mutex for writing if nobody holds it and no reader
// admitted after the last writer is still to come in, in one round trip;
// else it returns ErrLocked.
func (rw *RWMutex) TryLock(ctx context.Context) error {
	_, err := rw.take(ctx, &rw.w, false)
	return err
}

// Unlock releases the write hold and lets in the readers that were
// waiting, or else wakes one writer. It returns ErrNotAcquired, changing
// nothing, when the writer key no longer holds this participant's id.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.give(ctx, &rw.w) }

// RLock takes the mutex for reading, waiting as long as ctx allows while a
// writer holds it or waits for it (unless this reader was waiting when the
// last writer released: it then comes in before the next writer). Its
// errors are Lock.Acquire's.
func (rw *RWMutex) RLock(ctx context.Context) error {
	_, err := rw.take(ctx, &rw.r, true)
	return err
}

// TryRLock takes the mutex for reading if no writer holds it or waits for
// it, in one round trip; else it returns ErrLocked.
func (rw *RWMutex) TryRLock(ctx context.Context) error {
	_, err := rw.take(ctx, &rw.r, false)
	return err
}

// RUnlock releases this participant's read hold; the last reader out
// wakes a waiting writer. It returns ErrNotAcquired, changing nothing,
// when the read hold expired or was reset.
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.give(ctx, &rw.r) }

// current returns the side of the current or last hold, or the writer's
// before the first.
func (rw *RWMutex) current() *core {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.last == nil {
		return &rw.w
	}
	return rw.last
}

// Done returns a channel closed when the current hold, read or write,
// ends, as Lock.Done; a closed channel before the first.
func (rw *RWMutex) Done() <-chan struct{} { return rw.current().done() }

// Err returns nil while the current hold lasts and why it ended after, as
// Lock.Err; ErrNotAcquired before the first.
func (rw *RWMutex) Err() error { return rw.current().holdErr() }

// Token returns the fencing token of the current or last hold with
// WithFencing: reads and writes draw from one sequence, so a write's token
// is above every earlier read's and write's. 0 without WithFencing.
func (rw *RWMutex) Token() int64 { return rw.current().token() }

// Extend sets the current hold, read or write, to expire d from now (0:
// the RWMutex's expire), as Lock.Extend does for the writer and
// Semaphore.Extend for a reader.
func (rw *RWMutex) Extend(ctx context.Context, d time.Duration) error {
	return rw.current().extend(ctx, d)
}

// Settle waits, as long as ctx allows, for the work both sides still run
// in the background (see Lock.Settle).
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
	return rw.do(ctx, &rw.w, fn)
}

// RDo is Do for reading.
func (rw *RWMutex) RDo(ctx context.Context, fn func(ctx context.Context) error) error {
	return rw.do(ctx, &rw.r, fn)
}

func (rw *RWMutex) do(ctx context.Context, c *core, fn func(ctx context.Context) error) error {
	h, err := rw.take(ctx, c, true)
	if err != nil {
		return err
	}
	defer func() {
		c.mu.Lock()
		idle := c.state == stateIdle
		c.mu.Unlock()
		if idle {
			rw.unclaim(c)
		}
	}()
	return c.runHeld(ctx, h, fn)
}

// Locker returns a sync.Locker whose Lock and Unlock take and release the
// mutex for writing, as Lock.Locker does for a Lock (no deadline, Redis
// errors retried, a panic on an Unlock of a hold that is gone).
func (rw *RWMutex) Locker() sync.Locker {
	return locker{c: &rw.w, acquire: rw.Lock, release: rw.Unlock, err: rw.Err}
}

// RLocker returns a sync.Locker whose Lock and Unlock take and release the
// mutex for reading, as sync.RWMutex.RLocker does. It takes turns with
// Locker's: one participant holds one hold at a time.
func (rw *RWMutex) RLocker() sync.Locker {
	return locker{c: &rw.r, acquire: rw.RLock, release: rw.RUnlock, err: rw.Err}
}
