package redislock

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultSignalExpire is how long the wake-up signal of a released lock
// stays in Redis when no WithSignalExpire is given. It is python-redis-lock's
// default (1000 ms).
const defaultSignalExpire = time.Second

// An Option configures New, NewSemaphore, NewRWMutex, Check, List or
// ResetAll. A bad value makes the call return an error matching
// ErrInvalidArgument; an option never fails later.
type Option func(*config)

// config is what the options set; New validates it once.
type config struct {
	expire       time.Duration
	expireGiven  bool
	id           string
	idGiven      bool
	signalExpire time.Duration
	prefix       string
	autoRenewal  bool
	maxHold      time.Duration
	fencing      bool
	hashTag      *bool // nil: tagged exactly on a *redis.ClusterClient
	ack          replicaAck
	ackGiven     bool
	noTracking   bool
	margin       time.Duration
	marginGiven  bool
	observers    []Observer
	logger       *slog.Logger
	given        []string // the options given, by name (see only)
}

// mark records that the option name was given.
func (c *config) mark(name string) { c.given = append(c.given, name) }

// only returns an error matching ErrInvalidArgument that names the first
// option given that call does nothing with, takes listing those it uses:
// an option accepted and ignored would look as if it had worked.
func (c *config) only(call string, takes ...string) error {
	return c.refuse(call, func(name string) bool { return !slices.Contains(takes, name) })
}

// ignoring is only for a call that uses every option but those it ignores.
func (c *config) ignoring(call string, ignores ...string) error {
	return c.refuse(call, func(name string) bool { return slices.Contains(ignores, name) })
}

// refuse returns an error matching ErrInvalidArgument naming the first
// option given for which ignored is true.
func (c *config) refuse(call string, ignored func(name string) bool) error {
	for _, g := range c.given {
		if ignored(g) {
			return fmt.Errorf("%w: %s does nothing in %s", ErrInvalidArgument, g, call)
		}
	}
	return nil
}

// DefaultExpire is how long a Lock's key, a Semaphore's permit and an
// RWMutex's holds last without WithExpire; they are renewed while held, so
// a holder that dies frees them this long after its acquire or last
// renewal.
const DefaultExpire = 30 * time.Second

func newConfig(opts []Option) config {
	c := config{signalExpire: defaultSignalExpire, prefix: DefaultKeyPrefix}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if !c.expireGiven {
		// The watchdog default: a holder that dies frees the lock within
		// the expire, and a live one keeps it as long as it needs.
		c.expire, c.autoRenewal = DefaultExpire, true
	}
	return c
}

// WithExpire sets how long the lock key lives after an acquire or an
// Extend, in whole milliseconds: without it, DefaultExpire, renewed while
// held; with it, d, renewed only with WithAutoRenewal, as
// python-redis-lock's expire=d. WithExpire(0) is python-redis-lock's
// default: a key that never expires, which a holder that dies keeps until
// Reset. A negative d, or one below 1ms, makes New return an error matching
// ErrInvalidArgument; so does 0 for a Semaphore or an RWMutex.
func WithExpire(d time.Duration) Option {
	return func(c *config) { c.mark("WithExpire"); c.expire, c.expireGiven = d, true }
}

// WithLogger has the Lock write its events to logger through log/slog, at
// python-redis-lock's levels and with its logger names (the attribute
// "logger"), each with the lock's name, key and owner id. A nil logger, the
// default, logs nothing; a level the logger does not enable costs nothing.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) { c.mark("WithLogger"); c.logger = logger }
}

// WithObserver adds obs to the observers of the Lock's events (see
// Observer): given more than once, each observer gets every event, in the
// order given. The Lock keeps a copy: fields set on obs later do not
// reach it. A nil obs is ignored. The default is none, and costs nothing.
func WithObserver(obs *Observer) Option {
	return func(c *config) {
		c.mark("WithObserver")
		if obs != nil {
			c.observers = append(c.observers, *obs)
		}
	}
}

// WithID sets the owner id stored in the lock key (by default
// "<host>:<pid>:<uuid>", unique to the Lock), as-is. Locks
// with the same name and id are one owner: any of them can Extend or
// Release the lock another acquired, and an acquire that finds the id in
// the key returns ErrAlreadyAcquired, even after its own acquire whose
// reply was lost (the key then stays held until it expires or is
// released). An empty id makes New return an error matching
// ErrInvalidArgument.
func WithID(id string) Option {
	return func(c *config) { c.mark("WithID"); c.id, c.idGiven = id, true }
}

// WithSignalExpire sets how long the wake-up signal of a release stays in
// Redis when no waiter takes it (python-redis-lock's signal_expire; default
// 1 s), and so caps the woken waiter's turn (see Lock.TryAcquire), which is
// otherwise 100 ms. A d below 1ms makes New return an error matching
// ErrInvalidArgument.
func WithSignalExpire(d time.Duration) Option {
	return func(c *config) { c.mark("WithSignalExpire"); c.signalExpire = d }
}

// WithKeyPrefix sets the lock key's prefix exactly: the lock named name
// lives in prefix+name. The signal list's prefix is prefix less one
// trailing ':', plus "-signal:". The default is DefaultKeyPrefix. An empty
// prefix makes New return an error matching ErrInvalidArgument.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) { c.mark("WithKeyPrefix"); c.prefix = prefix }
}

// WithAutoRenewal renews the lock key to the full expire while it is held,
// every two thirds of the expire less the safety margin, until Release,
// retrying Redis errors. If no renewal succeeds before the expire less the
// margin runs out on the local clock, or Redis says the key is gone or
// someone else's, the lock is lost (see Done). A Lock dropped without
// Release stops renewing when the garbage collector finds it; dropped
// means unreachable, which for a local variable is after its last use, so
// use the Lock after the job (defer l.Release(ctx) does), or its key can
// expire while the job runs. Renewal is
// on without WithExpire, and off with WithExpire(d) unless WithAutoRenewal
// is given; with WithExpire(0), New returns an error matching
// ErrInvalidArgument.
func WithAutoRenewal() Option {
	return func(c *config) { c.mark("WithAutoRenewal"); c.autoRenewal = true }
}

// WithMaxHold caps how long auto-renewal keeps one acquisition alive: the
// key dies d after the acquire, and the hold is lost with ErrMaxHold. The
// default, 0, is no cap. A negative d, one below the expire, or any d on a
// lock that is not renewed makes New return an error matching
// ErrInvalidArgument.
func WithMaxHold(d time.Duration) Option {
	return func(c *config) { c.mark("WithMaxHold"); c.maxHold = d }
}

// WithFencing makes every acquire also take a fencing token (see Token),
// larger than that of every earlier grant of the lock. Tokens live in the
// key "lock-fence:<name>" (no expire). They keep growing across a restart
// that lost the key, while the server's clock does not go back, and across
// a failover to a replica that has the last token (WithReplicaAck) or a
// clock in sync with its master's (see docs/reference.md in the
// repository).
func WithFencing() Option {
	return func(c *config) { c.mark("WithFencing"); c.fencing = true }
}

// WithReplicaAck makes every write of the lock key (and of the fence key)
// wait until n replicas have it (Redis WAIT, at most timeout), so that a
// failover to one of them keeps the lock. An acquire not acknowledged in
// time releases the key and returns ErrNotReplicated; Extend returns it
// with the lock still held; a renewal counts it as a failure. With more
// replicas than n, a failover may promote one that missed the write (Check
// warns). n must be at least 1 and timeout from 1ms to a third of the
// client's read timeout, else New returns an error matching
// ErrInvalidArgument. See docs/reference.md in the repository.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(c *config) {
		c.mark("WithReplicaAck")
		c.ack = replicaAck{n: n, timeout: timeout}
		c.ackGiven = true
	}
}

// WithSafetyMargin sets how long before the lock key can expire, counted on
// the local clock from when the acquire or last successful renewal was
// sent, a hold counts as lost: a holder whose renewals fail has d to stop
// while the lock is still its own. The default is 1% of the expire plus 2
// ms, at most half the expire. A d below 0 or above half the expire, or any
// d without expire, makes New return an error matching ErrInvalidArgument.
func WithSafetyMargin(d time.Duration) Option {
	return func(c *config) { c.mark("WithSafetyMargin"); c.margin, c.marginGiven = d, true }
}

// defaultSafetyMargin is the safety margin of a Lock with the given expire
// when no WithSafetyMargin is given: expire/100 + 2ms, at most expire/2;
// 0 for a lock without expire.
func defaultSafetyMargin(expire time.Duration) time.Duration {
	if expire <= 0 {
		return 0
	}
	return min(expire/100+2*time.Millisecond, expire/2)
}

// WithTracking turns the watch on held keys on (the default) or off. A
// watched key changed by someone else (a Reset, a DEL, another owner's SET,
// an eviction, a FLUSHALL; not a SWAPDB) closes Done within milliseconds,
// for two connections and two goroutines per client and Redis node, and a
// GET per renewal or Extend. Where Redis refuses it (an ACL, a proxy, a
// client other than *redis.Client and *redis.ClusterClient), a loss is
// found by the renewal or the local deadline; Check reports it.
func WithTracking(on bool) Option {
	return func(c *config) { c.mark("WithTracking"); c.noTracking = !on }
}

// WithHashTag chooses the key scheme: with true, "lock:{name}" and
// "lock-signal:{name}", in one Redis Cluster slot; with false,
// python-redis-lock's "lock:name" and "lock-signal:name". The default is
// true exactly on a *redis.ClusterClient, where false makes New return an
// error matching ErrInvalidArgument. Give true for a cluster behind a
// proxy.
func WithHashTag(on bool) Option {
	return func(c *config) { c.mark("WithHashTag"); c.hashTag = &on }
}

// tagged says whether the keys for client are hash-tagged.
func (c *config) tagged(client redis.UniversalClient) (bool, error) {
	_, cluster := client.(*redis.ClusterClient)
	switch {
	case c.hashTag == nil:
		return cluster, nil
	case !*c.hashTag && cluster:
		return false, errCrossSlot
	}
	return *c.hashTag, nil
}

// validate checks the configuration and fills in the random id.
func (c *config) validate() error {
	if err := c.basicsError(); err != nil {
		return err
	}
	if err := c.combinationError(); err != nil {
		return err
	}
	if !c.marginGiven {
		c.margin = defaultSafetyMargin(c.expire)
	}
	if !c.idGiven {
		c.id = newOwnerID()
	}
	return nil
}

// basicsError returns the sentinel of the first option that is invalid on
// its own, nil when none is.
func (c *config) basicsError() error {
	switch {
	case c.expire < 0 || (c.expire > 0 && c.expire < time.Millisecond):
		return fmt.Errorf("%w %v: want 0 (never) or at least 1ms", errInvalidExpire, c.expire)
	case c.signalExpire < time.Millisecond:
		return errInvalidSignalExpire
	case c.prefix == "":
		return errInvalidPrefix
	case c.idGiven && c.id == "":
		return errInvalidID
	}
	return nil
}

// combinationError returns the sentinel of the first option that is
// invalid with the others, nil when none is.
func (c *config) combinationError() error {
	switch {
	case c.autoRenewal && c.expire == 0:
		return errInvalidAutoRenewal
	case c.maxHold != 0 && (c.maxHold < 0 || !c.autoRenewal || c.maxHold < c.expire):
		return errInvalidMaxHold
	case c.ackGiven && (c.ack.n < 1 || c.ack.timeout < time.Millisecond):
		return errInvalidReplicaAck
	case c.marginGiven && (c.margin < 0 || c.expire == 0 || c.margin > c.expire/2):
		return errInvalidSafetyMargin
	}
	return nil
}
