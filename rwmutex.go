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
// every process that uses the same Redis and key prefix. It is safe for
// concurrent use: RLock returns a read Permit of its own; Lock takes the
// write hold, one at a time, as a Lock does. Once a writer waits, new
// readers wait too, and the readers waiting when a writer releases come in
// before the next writer. Each hold expires on its own.
type RWMutex struct {
	w core // first: the writer's cleanup (see run) is attached to the RWMutex's address
	r core // the readers' side: the keys each read permit holds on (see reader)

	readers permits
}

// NewRWMutex returns an RWMutex named name on client. It sends nothing to
// Redis and checks its arguments as NewSemaphore does, but accepts
// WithTracking, for the write hold. With WithID the writer and every reader
// hold under that id: another RLock returns ErrAlreadyAcquired.
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
	rw := &RWMutex{readers: permits{rwReadProtocol{}, c, rt, fence, reg}}
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

// ID is Lock.ID for the write hold; each read Permit has its own.
func (rw *RWMutex) ID() string { return rw.w.ownerID() }

// Key returns the writer key: it holds the writer's id while one holds.
func (rw *RWMutex) Key() string { return rw.w.keys[0] }

// Lock takes the mutex for writing, as Lock.Acquire takes a Lock, waiting
// while readers or another writer hold it; while it waits, new readers wait
// too. Its errors are Lock.Acquire's.
func (rw *RWMutex) Lock(ctx context.Context) error {
	_, err := rw.w.runQueued(ctx, true)
	return err
}

// TryLock takes the mutex for writing, in one round trip, if nobody holds
// it and no reader let in by the last writer's release has still to come
// in; else it returns ErrLocked, as it does at once while another goroutine
// holds or takes the write hold through rw.
func (rw *RWMutex) TryLock(ctx context.Context) error {
	_, err := rw.w.runQueued(ctx, false)
	return err
}

// Unlock releases the write hold as Lock.Release does, with its errors, and
// lets in the readers that were waiting, or else wakes one writer.
func (rw *RWMutex) Unlock(ctx context.Context) error {
	err, _ := rw.w.releaseTurn(ctx, false)
	return err
}

// RLock takes the mutex for reading, waiting as long as ctx allows while a
// writer holds it or waits for it, and returns the read Permit, whose
// Release is the RUnlock. Its errors are Lock.Acquire's; the Permit is nil
// with an error.
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

// reader takes a read permit of rw: see permits.take.
func (rw *RWMutex) reader(ctx context.Context, blocking bool) (*Permit, *hold.Hold, error) {
	return rw.readers.take(ctx, &rw.r, blocking)
}

// Done is Lock.Done for the write hold.
func (rw *RWMutex) Done() <-chan struct{} { return rw.w.done() }

// Err is Lock.Err for the write hold.
func (rw *RWMutex) Err() error { return rw.w.holdErr() }

// Token is Lock.Token for the write hold. Reads and writes draw from one
// sequence: a write's token is above every earlier read's and write's.
func (rw *RWMutex) Token() int64 { return rw.w.token() }

// Extend is Lock.Extend for the write hold.
func (rw *RWMutex) Extend(ctx context.Context, d time.Duration) error {
	return rw.w.extend(ctx, d)
}

// Settle is Lock.Settle for the writer and the read permits.
func (rw *RWMutex) Settle(ctx context.Context) error {
	if err := rw.w.settle(ctx); err != nil {
		return err
	}
	return rw.r.settle(ctx)
}

// Do is Lock.Do on the write hold.
func (rw *RWMutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return rw.w.do(ctx, fn, true)
}

// TryDo is Do without waiting: while the write hold is another's or read
// permits are held, it returns ErrLocked at once and fn does not run.
func (rw *RWMutex) TryDo(ctx context.Context, fn func(ctx context.Context) error) error {
	return rw.w.do(ctx, fn, false)
}

// RDo is Do for reading, on a read permit of its own.
func (rw *RWMutex) RDo(ctx context.Context, fn func(ctx context.Context) error) error {
	return rw.rdo(ctx, fn, true)
}

// TryRDo is RDo without waiting: while a writer holds or waits, it
// returns ErrLocked at once and fn does not run.
func (rw *RWMutex) TryRDo(ctx context.Context, fn func(ctx context.Context) error) error {
	return rw.rdo(ctx, fn, false)
}

func (rw *RWMutex) rdo(ctx context.Context, fn func(ctx context.Context) error, wait bool) error {
	if fn == nil {
		return rw.w.wrap(errNilFunc)
	}
	p, h, err := rw.reader(ctx, wait)
	if err != nil {
		return err
	}
	return p.runHeld(ctx, h, fn)
}

// Locker is Lock.Locker for the write hold.
func (rw *RWMutex) Locker() sync.Locker {
	first := func(ctx context.Context) (error, func()) { return rw.w.releaseTurn(ctx, true) }
	return locker{c: &rw.w, acquire: rw.Lock, release: rw.Unlock, firstRelease: first, err: rw.Err}
}
