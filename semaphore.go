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
// that uses the same Redis and key prefix, into what it guards, as
// golang.org/x/sync/semaphore does with a weight of one. It is safe for
// concurrent use: each successful Acquire returns a Permit of its own,
// which expires on its own and is renewed while held.
type Semaphore struct {
	core    // the semaphore's keys, for Status, Reset and Settle
	size    int
	permits permits
}

// NewSemaphore returns a Semaphore named name with size permits on client,
// sending nothing to Redis. It checks its arguments as New does, and also
// refuses, with an error matching ErrInvalidArgument, a size below 1,
// WithExpire(0), a name with '}' or a prefix with a brace (its keys are
// always hash-tagged), WithHashTag and WithTracking. With WithID every
// permit is held under that id: another Acquire returns ErrAlreadyAcquired.
// Every process must use the same size.
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
	extra := []any{strconv.Itoa(size), strconv.FormatInt(c.signalExpire.Milliseconds(), 10)}
	s := &Semaphore{size: size, permits: permits{semProtocol{}, c, rt, fence, extra}}
	s.core.init(client, name, semProtocol{}, c, rt, keys, fence, extra)
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

// Key returns the Redis key of the semaphore's holders.
func (s *Semaphore) Key() string { return s.keys[0] }

// Acquire takes a permit, waiting as long as ctx allows while all are
// held, and returns it; Release it when done. Its errors are
// Lock.Acquire's, and ErrSizeMismatch; the Permit is then nil. A release
// wakes one waiter per permit it frees. A Permit no longer used stops
// renewing when the garbage collector finds it, as a Lock does (see
// WithAutoRenewal): defer p.Release(ctx) keeps it for the job.
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

// permit takes a permit of s: see permits.take.
func (s *Semaphore) permit(ctx context.Context, blocking bool) (*Permit, *hold.Hold, error) {
	p, h, err := s.permits.take(ctx, &s.core, blocking)
	if errors.Is(err, ErrSizeMismatch) {
		err = fmt.Errorf("%w (this Semaphore's size is %d)", err, s.size)
	}
	return p, h, err
}

// Do acquires a permit (waiting as Acquire does), runs fn while holding
// it, and releases it, as Lock.Do does, with its results.
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.do(ctx, fn, true)
}

// TryDo is Do without waiting: when every permit is held it returns
// ErrLocked at once and fn does not run.
func (s *Semaphore) TryDo(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.do(ctx, fn, false)
}

func (s *Semaphore) do(ctx context.Context, fn func(ctx context.Context) error, wait bool) error {
	if fn == nil {
		return s.wrap(errNilFunc)
	}
	p, h, err := s.permit(ctx, wait)
	if err != nil {
		return err
	}
	return p.runHeld(ctx, h, fn)
}

// Settle is Lock.Settle for this Semaphore's permits.
func (s *Semaphore) Settle(ctx context.Context) error { return s.settle(ctx) }

// permits is what each Permit of a Semaphore, or each read hold of an
// RWMutex, is made of.
type permits struct {
	proto protocol
	cfg   config
	rt    time.Duration
	fence string
	extra []any
}

// take makes a Permit on the keys of side (the Semaphore's core, the
// RWMutex's readers'), under an owner id of its own unless one was given,
// and acquires it, waiting if blocking. side's Settle waits for the
// permit's cleanups.
func (ps *permits) take(ctx context.Context, side *core, blocking bool) (*Permit, *hold.Hold, error) {
	if err := side.usable(); err != nil {
		return nil, nil, err
	}
	c := ps.cfg
	if !c.idGiven {
		c.id = newOwnerID() // each permit is a holder of its own
	}
	p := &Permit{}
	p.core.init(side.client, side.name, ps.proto, c, ps.rt, side.keys, ps.fence, ps.extra)
	p.turnMS = side.turnMS
	p.cleanups, p.abandons = side.cleanups, side.abandons
	h, err := p.run(ctx, blocking, nil)
	if err != nil {
		return nil, nil, err
	}
	return p, h, nil
}

// A Permit is one shared hold, a Semaphore's permit or an RWMutex's read
// hold, with its own owner id, expiry and renewal. It is safe for
// concurrent use; it holds once, until its Release or its loss.
type Permit struct {
	core // first: a Permit dropped while held is abandoned (see take)
}

// Release gives the permit back, waking one waiter for it and one per
// permit that expired meanwhile (the last reader out wakes a waiting
// writer), and ends the hold as Lock.Release does. It returns
// ErrNotAcquired, changing nothing, when the permit is no longer held under
// its id (it expired, was reset, or was released before).
func (p *Permit) Release(ctx context.Context) error { return p.release(ctx, nil) }

// Extend sets the permit to expire d from now on the server's clock, as
// Lock.Extend does, with its errors but ErrNotExpirable.
func (p *Permit) Extend(ctx context.Context, d time.Duration) error { return p.extend(ctx, d) }

// Done returns a channel closed when the permit is no longer held, as
// Lock.Done; a loss is found at its renewal or local deadline.
func (p *Permit) Done() <-chan struct{} { return p.done() }

// Err returns nil while the permit is held, and afterwards why it ended,
// as Lock.Err: ErrReleased, or an error matching ErrLost and its reason.
func (p *Permit) Err() error { return p.holdErr() }

// Token returns the permit's fencing token with WithFencing (0 without),
// above every earlier grant of this semaphore or RWMutex.
func (p *Permit) Token() int64 { return p.token() }

// ID returns the owner id the permit is held under: a random one, or the
// one given with WithID.
func (p *Permit) ID() string { return p.ownerID() }

// Key returns the Redis key of the holders it is one of: Semaphore.Key, or
// an RWMutex's readers key.
func (p *Permit) Key() string { return p.keys[0] }

// Status reads who holds a permit, earliest expiry first, in one round
// trip. Expired holders are dropped on the way.
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

// Reset drops every holder, whoever holds, and wakes one waiter per permit.
// The holders are not told until their renewal finds the permit gone, and
// their Release returns ErrNotAcquired. It returns how many it dropped.
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
