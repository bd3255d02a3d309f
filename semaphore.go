package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/hold"
	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// A Semaphore lets at most size holders at a time, across every process
// that uses the same Redis and key prefix, into what it guards: "at most 5
// workers call the payment API at once". It is the distributed form of
// golang.org/x/sync/semaphore with a weight of one per Acquire.
//
// A Semaphore is shared as an x/sync semaphore is: any number of
// goroutines may call Acquire on one value, and each successful call
// returns a Permit of its own, with its own owner id, expiry, renewal and
// loss; the Permit's Release gives it back. Each permit expires on its
// own, judged by the Redis server's clock, and is renewed while held, so
// a holder that crashed frees its permit at its expire (DefaultExpire
// unless WithExpire) and a waiter wakes then. Waiters never poll: they
// sleep in BLPOP on the semaphore's signal list, and a release wakes one
// waiter per permit it frees.
//
// Its keys are its own, all hash-tagged with the name so that they share
// one cluster slot; python-redis-lock has no semaphore.
type Semaphore struct {
	core // the semaphore's keys, for Holders, Reset and Settle
	size int

	// What each permit's core is made of (see permit).
	cfg   config
	rt    time.Duration
	fence string
	extra []any
}

// NewSemaphore returns a Semaphore named name with size permits on
// client. It sends nothing to Redis: it only checks its arguments,
// returning an error matching ErrInvalidArgument (ErrNilClient for a nil
// client) for an empty name, a size below 1, WithExpire(0) (a semaphore's
// permits must expire), a name with '}' or a prefix with a brace, or a bad
// option. Without WithExpire a permit lasts DefaultExpire and is renewed
// while held.
//
// The options are the Lock's but for WithHashTag (a semaphore's keys are
// always hash-tagged) and WithTracking (a holder learns of a loss at its
// renewal or local deadline, as an untracked Lock does): either is refused
// with an error matching ErrInvalidArgument. With WithID every permit is
// held under that id, so that one holds at a time: another Acquire
// returns ErrAlreadyAcquired while it does.
//
// Every process that uses the name must use the same size: an Acquire
// that finds holders with another size fails with ErrSizeMismatch and
// takes nothing.
func NewSemaphore(client redis.UniversalClient, name string, size int, opts ...Option) (*Semaphore, error) {
	if size < 1 {
		return nil, fmt.Errorf("semaphore %q: %w", name, errInvalidSize)
	}
	c, rt, ks, err := familyConfig(client, name, "semaphore", opts, "WithHashTag", "WithTracking")
	if err != nil {
		return nil, err
	}
	keys, fence := ks.SemKeys(name)
	if !c.fencing {
		fence = ""
	}
	s := &Semaphore{size: size, cfg: c, rt: rt, fence: fence,
		extra: []any{strconv.Itoa(size), strconv.FormatInt(c.signalExpire.Milliseconds(), 10)}}
	s.core.init(client, name, semProtocol{}, c, rt, keys, fence, s.extra)
	return s, nil
}

// semProtocol is the Semaphore's (see internal/wire/lua/sem_*.lua).
type semProtocol struct{}

func (semProtocol) kind() string { return "semaphore" }
func (semProtocol) ref() Kind    { return KindSemaphore }
func (semProtocol) scripts() scripts {
	return scripts{wire.SemAcquire, wire.SemRelease, wire.SemExtend, wire.SemGiveback}
}

// layout: the keys are of one slot, so a solo try needs none left out.
func (semProtocol) layout(keys []string) (solo, extend []string) {
	return keys[:3:3], []string{keys[0], keys[2]}
}
func (semProtocol) readsOwner() bool           { return false }
func (semProtocol) shared() bool               { return true }
func (semProtocol) registration() registration { return unregistered{} }

// Name returns the semaphore's name, as given to NewSemaphore.
func (s *Semaphore) Name() string { return s.name }

// Size returns how many may hold at once.
func (s *Semaphore) Size() int { return s.size }

// Key returns the Redis key of the holders: a sorted set of owner ids,
// each scored by its expiry in milliseconds of the server's clock.
func (s *Semaphore) Key() string { return s.keys[0] }

// Acquire takes a permit, waiting as long as ctx allows while all are
// held, and returns it. Release it when done.
//
// What can go wrong (the Permit is then nil):
//   - ctx ends while every permit is held: the error matches ErrLocked
//     and ctx's error;
//   - Redis does not answer: ErrUnreachable, never ErrLocked;
//   - the holders use another size: ErrSizeMismatch;
//   - a holder already has the caller-given id (WithID):
//     ErrAlreadyAcquired.
//
// It waits as Lock.Acquire does: in BLPOP on the signal list, woken by a
// release (one waiter per freed permit) or, when a holder died, at the
// earliest holder's expiry.
func (s *Semaphore) Acquire(ctx context.Context) (*Permit, error) {
	p, _, err := s.permit(ctx, true)
	return p, err
}

// TryAcquire takes a permit if one is free, in one round trip, without
// waiting: it returns ErrLocked when all are held. Its other errors are
// Acquire's.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Permit, error) {
	p, _, err := s.permit(ctx, false)
	return p, err
}

// permit acquires a new permit, and returns it with its hold.
func (s *Semaphore) permit(ctx context.Context, blocking bool) (*Permit, *hold.Hold, error) {
	c := s.cfg
	if !c.idGiven {
		c.id = newOwnerID() // each permit is a holder of its own
	}
	p := &Permit{}
	p.core.init(s.client, s.name, semProtocol{}, c, s.rt, s.keys, s.fence, s.extra)
	p.cleanups, p.abandons = s.cleanups, s.abandons // the semaphore's Settle waits for them
	h, err := p.run(ctx, blocking)
	if err != nil {
		if errors.Is(err, ErrSizeMismatch) {
			err = fmt.Errorf("%w (this Semaphore's size is %d)", err, s.size)
		}
		return nil, nil, err
	}
	return p, h, nil
}

// Do acquires a permit (waiting as Acquire does), runs fn while holding
// it, and releases it, even if fn panics. fn's context is cancelled, with
// a cause matching ErrLost, when the permit is lost. Its results are
// Lock.Do's.
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	p, h, err := s.permit(ctx, true)
	if err != nil {
		return err
	}
	return p.runHeld(ctx, h, fn)
}

// TryDo is Do without waiting: when every permit is held it returns
// ErrLocked at once and fn does not run.
func (s *Semaphore) TryDo(ctx context.Context, fn func(ctx context.Context) error) error {
	p, h, err := s.permit(ctx, false)
	if err != nil {
		return err
	}
	return p.runHeld(ctx, h, fn)
}

// Settle waits, as long as ctx allows, for the work this Semaphore's
// permits still run in the background, as Lock.Settle does.
func (s *Semaphore) Settle(ctx context.Context) error { return s.settle(ctx) }

// A Permit is one shared hold: a Semaphore's permit, or an RWMutex's
// read hold, from the call that returned it until its Release or its
// loss. Each has its own owner id, expiry, renewal and loss. It is safe
// for use by several goroutines; it holds once, and is not acquired
// again.
type Permit struct {
	core // first: a Permit dropped while held is abandoned (see take)
}

// Release gives the permit back and wakes one waiter for it (and one for
// each permit that expired meanwhile); a read permit's Release is the
// RUnlock: the last reader out wakes a waiting writer. It returns ErrNotAcquired,
// changing nothing, when the permit is no longer held under its id: it
// expired on the server's clock, was reset, or was released before. A
// release whose reply was lost is judged as Lock.Release judges one. Then
// Done is closed and Err returns ErrReleased, or the loss.
func (p *Permit) Release(ctx context.Context) error { return p.release(ctx, nil) }

// Extend sets the permit to expire d from now on the server's clock, if it
// is still held; d of 0 means its own expire (WithExpire). It returns an
// error matching ErrInvalidArgument, sending nothing, for a d below 1ms or
// not longer than the safety margin, and ErrNotAcquired when the permit is
// no longer held (it is never recreated). It also moves the permit's local
// deadline; renewals never shorten it, as with Lock.Extend.
func (p *Permit) Extend(ctx context.Context, d time.Duration) error { return p.extend(ctx, d) }

// Done returns a channel closed when the permit is no longer held: by
// Release, or by loss, learnt at its renewal (the permit gone) or when its
// local deadline passes with no renewal answered.
func (p *Permit) Done() <-chan struct{} { return p.done() }

// Err returns nil while the permit is held, and afterwards why it ended,
// as Lock.Err: ErrReleased, or an error matching ErrLost and its reason.
func (p *Permit) Err() error { return p.holdErr() }

// Token returns the permit's fencing token with WithFencing: larger than
// every earlier grant of a permit of this semaphore (of a hold of this
// RWMutex, read or write); 0 without it.
func (p *Permit) Token() int64 { return p.token() }

// ID returns the owner id the permit is held under, as Holders lists it:
// a random one, or the one given with WithID.
func (p *Permit) ID() string { return p.ownerID() }

// Key returns the Redis key of the holders it is one of: Semaphore.Key,
// or an RWMutex's readers key (a sorted set of reader ids, each scored by
// its expiry in milliseconds of the server's clock).
func (p *Permit) Key() string { return p.keys[0] }

// Status reads who holds a permit of the semaphore, earliest expiry
// first, in one round trip: a LockInfo each, with the size they use.
// Expired holders are dropped on the way, as every script of the
// semaphore does.
func (s *Semaphore) Status(ctx context.Context) (Status, error) {
	holders, err := readHolders(ctx, s.client, s.name, s.keys)
	if err != nil {
		return Status{}, s.wrap(fmt.Errorf("status: %w", err))
	}
	return Status{Holders: holders}, nil
}

// readHolders runs the holders script on the keys of the semaphore name.
func readHolders(ctx context.Context, client redis.UniversalClient, name string, keys []string) ([]LockInfo, error) {
	var vals []any
	err := topology.Do(ctx, client, func() (err error) {
		vals, err = wire.SemHolders.Run(ctx, client, []string{keys[0], keys[2]}).Slice()
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(vals)%2 != 1 {
		return nil, wire.ErrBadReply
	}
	size, ok := vals[0].(int64)
	if !ok {
		return nil, wire.ErrBadReply
	}
	holders := make([]LockInfo, 0, len(vals)/2)
	for i := 1; i+1 < len(vals); i += 2 {
		id, ok1 := vals[i].(string)
		ms, ok2 := vals[i+1].(int64)
		if !ok1 || !ok2 {
			return nil, wire.ErrBadReply
		}
		holders = append(holders, LockInfo{Name: name, Key: keys[0], Owner: id,
			TTL: time.Duration(ms) * time.Millisecond, Kind: KindSemaphore, Size: int(size)})
	}
	return holders, nil
}

// Reset drops every holder of the semaphore, whoever holds, and wakes one
// waiter per permit. It is for administration and recovery: the holders
// are not told until their renewal finds the permit gone, and their
// Release returns ErrNotAcquired. It returns how many holders it dropped.
func (s *Semaphore) Reset(ctx context.Context) (int, error) {
	n, err := resetSemaphore(ctx, s.client, s.keys, s.signalExpireMS)
	if err != nil {
		return 0, s.wrap(fmt.Errorf("reset: %w", err))
	}
	return n, nil
}

func resetSemaphore(ctx context.Context, client redis.UniversalClient, keys []string, signalExpireMS string) (int, error) {
	var n int
	err := topology.Do(ctx, client, func() (err error) {
		n, err = wire.SemReset.Run(ctx, client, keys, signalExpireMS).Int()
		return err
	})
	return n, err
}

// sizeMismatchError is an acquire's answer when the semaphore's holders
// use another size. It is a reply from Redis (nothing was taken): the
// machinery gives back nothing for it unless a signal was popped.
type sizeMismatchError struct{ stored int64 }

func (e *sizeMismatchError) Error() string {
	return fmt.Sprintf("%v: its holders use size %d", ErrSizeMismatch, e.stored)
}

func (e *sizeMismatchError) Is(target error) bool { return target == ErrSizeMismatch }

// RedisError makes it a redis.Error: a reply, after which the try is known
// to have taken nothing.
func (e *sizeMismatchError) RedisError() {}

var _ redis.Error = (*sizeMismatchError)(nil)
