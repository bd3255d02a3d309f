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

// An Option configures a Lock in New (and the key scheme in ResetAll).
// Options are checked by New, which returns an error wrapping
// ErrInvalidArgument for any bad value; an option never fails later.
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
// RWMutex's holds last unless WithExpire says otherwise; they are then
// renewed while held. A holder that dies frees its share this long after
// its acquire or last renewal.
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

// WithExpire sets how long the lock key lives after an acquire (or an
// Extend) before Redis deletes it, so that a crashed holder cannot keep the
// lock forever. Redis counts it in whole milliseconds (fractions are
// dropped).
//
// Without WithExpire, the key lives DefaultExpire (30 s) and is renewed
// while held (as WithAutoRenewal does), so a holder that dies frees the
// lock within 30 s and a long job keeps it. With WithExpire(d), the key
// lives d and is renewed only with WithAutoRenewal, as python-redis-lock's
// expire=d. WithExpire(0) is python-redis-lock's default, expire=None: the
// key never expires, and a holder that dies without releasing keeps the
// lock until Reset. A negative value, or a positive one below 1ms, makes
// New return an error matching ErrInvalidArgument.
//
// For a Semaphore it is how long a permit lasts, and for an RWMutex how
// long each hold lasts, and 0 is refused (an error matching
// ErrInvalidArgument): a share that never expires is lost for good when
// its holder dies.
func WithExpire(d time.Duration) Option {
	return func(c *config) { c.mark("WithExpire"); c.expire, c.expireGiven = d, true }
}

// WithLogger has the Lock write its events to logger, through log/slog,
// at python-redis-lock's levels and with an attribute "logger" holding
// python-redis-lock's logger name (redis_lock.acquire,
// redis_lock.refresh.thread...), so that the lines of a mixed fleet are
// filtered alike; see the README's "Observing locks in production" for
// every event. Each line also carries the lock's name, key and owner id.
//
// The default, and a nil logger, log nothing: a library does not write to
// a process's logs unasked. A level the logger does not enable costs
// nothing (no attribute is built).
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

// WithID sets the owner id stored in the lock key. Lock values created with
// the same name and id act as one owner: any of them can Extend or Release
// the lock that another acquired, and an acquire that finds the id already
// in the key returns ErrAlreadyAcquired.
//
// The default is "<host>:<pid>:<uuid>": the host name and process id, so
// that an operator can tell which process holds the lock (see ParseOwner),
// then a random UUIDv4 (122 random bits from crypto/rand), which makes it
// unique to the Lock. An empty id makes New return an error matching ErrInvalidArgument. Ids are
// stored as-is; python-redis-lock reads them as ASCII.
//
// A shared id costs one safety net: with its own random id, a Lock whose
// acquire reply was lost (go-redis retries it) recognises the key as its
// own and takes it; with a given id it cannot tell its own lost acquire
// from another Lock's hold, returns ErrAlreadyAcquired, and the key stays
// held under that id until it expires or one of its Locks releases it.
// Likewise, the read of the key shortly before a hold's local deadline
// (see Lock.Done) counts a key that holds the id as this hold's, extended
// by another Lock or process with the id (python-redis-lock's extend()).
func WithID(id string) Option {
	return func(c *config) { c.mark("WithID"); c.id, c.idGiven = id, true }
}

// WithSignalExpire sets how long the wake-up signal pushed by a release
// stays in Redis when no waiter takes it (Python's signal_expire). The
// default is 1 s, python-redis-lock's. A value below 1ms makes New return
// an error matching ErrInvalidArgument. The woken waiter's turn (see the README's Mixed
// fleets) is 100 ms, or the signal expire when that is shorter.
func WithSignalExpire(d time.Duration) Option {
	return func(c *config) { c.mark("WithSignalExpire"); c.signalExpire = d }
}

// WithKeyPrefix sets the lock key's prefix exactly: the lock named name
// lives in prefix+name. The signal list's prefix follows from it: one
// trailing ':' is dropped and "-signal:" appended. The default is
// DefaultKeyPrefix ("lock:", giving "lock-signal:"), python-redis-lock's.
// With "_mayan_lock:" the lock key is the one Mayan EDMS workers take with
// SET NX PX. An empty prefix makes New return an error matching ErrInvalidArgument.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) { c.mark("WithKeyPrefix"); c.prefix = prefix }
}

// WithAutoRenewal keeps the lock alive while it is held: a goroutine,
// started by Acquire and stopped (and waited for) by Release, extends the
// key to the full expire every two thirds of the expire less the safety
// margin (WithSafetyMargin). A renewal that fails on a Redis error is
// retried until the expire less the margin runs out on the local clock;
// if none succeeds by then, or Redis says the key is gone or someone
// else's, the lock is lost: Done closes and Err says why. A Lock dropped
// without Release stops renewing when the garbage collector finds it, and
// its key then expires.
//
// Renewal is on by default, with the default expire (see WithExpire). With
// WithExpire(d) it is off unless WithAutoRenewal is given: the key expires
// after d unless Extend is called. With WithExpire(0), New returns an
// error matching ErrInvalidArgument: there is nothing to renew.
func WithAutoRenewal() Option {
	return func(c *config) { c.mark("WithAutoRenewal"); c.autoRenewal = true }
}

// WithMaxHold caps how long auto-renewal keeps one acquisition alive: the
// last renewal before d sets the expire so that the key dies d after the
// acquire, and the hold is then lost with ErrMaxHold. It protects against a
// holder that is stuck but still renewing.
//
// The default, and 0, mean no cap. A negative value, a value below the
// expire, or any value on a lock that is not renewed (WithExpire(d)
// without WithAutoRenewal, or WithExpire(0)) makes New return an error
// matching ErrInvalidArgument. With no WithExpire, renewal is on.
func WithMaxHold(d time.Duration) Option {
	return func(c *config) { c.mark("WithMaxHold"); c.maxHold = d }
}

// WithFencing makes every successful acquire also return a fencing token,
// read with Token: a number that grows with every grant of the lock, taken
// in the same script and round trip as the lock. Pass it to the resource
// the lock protects, which refuses any write carrying a token lower than
// one it has seen: a holder paused past its expire then cannot write
// after the next holder did.
//
// Tokens are kept in the key "lock-fence:<name>" (no expire). Each one is
// the larger of the previous token + 1 and the Redis server's clock in
// microseconds, so tokens keep growing across a restart that lost the key,
// as long as the server's clock does not go back. Across a failover they
// keep growing when the promoted replica has the last token (WithReplicaAck
// waits for the fence key too: the same script writes it), or else when
// its clock is not behind its old master's by more than the time between
// that token's grant and the failover: keep master and replica clocks in
// sync (Check warns beyond 500 ms). The default is no fencing, and no
// fence key is written.
func WithFencing() Option {
	return func(c *config) { c.mark("WithFencing"); c.fencing = true }
}

// WithReplicaAck makes every write of the lock key wait until n replicas
// have it (Redis WAIT, at most timeout), so that a failover to one of them
// keeps the lock. An acquire that is not acknowledged in time releases the
// key and returns ErrNotReplicated; so does Extend (the lock stays held);
// an unacknowledged renewal counts as a failed one.
//
// The default is no waiting: a failover may promote a replica that never
// received the lock. n must be at least 1 and timeout from 1ms to a third
// of the client's read timeout (a waiter's BLPOP and the WAIT behind it
// share two thirds of it), else New returns an error matching ErrInvalidArgument. Redis
// ends a WAIT at its timer's resolution (100 ms with the default hz 10),
// so a short timeout takes about that long when replicas do not answer.
//
// The writes and their WAIT are sent to the master of the lock key over
// one connection: on a Sentinel failover client, the current master; on a
// cluster client, the master of the key's slot, following MOVED and ASK
// while the slot migrates (the client's slot map is reloaded on MOVED and
// when a node stops answering, as in a shard's failover).
//
// Only n replicas are waited for: with more replicas than n, a failover
// may still promote one that missed the write (Check warns). The fence key
// of WithFencing is written by the same script, so the ack covers it too.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(c *config) {
		c.mark("WithReplicaAck")
		c.ack = replicaAck{n: n, timeout: timeout}
		c.ackGiven = true
	}
}

// WithSafetyMargin sets how long before the lock key can expire a hold
// counts as lost: Done closes, and Do's context is cancelled, d before the
// earliest moment Redis may delete the key (counted on the local clock
// from when the acquire or the last successful renewal was sent), so
// that a holder whose renewals fail has d to stop its work while the lock
// is still its own. Renewals run every two thirds of the expire less d.
//
// The default is 1% of the expire plus 2 ms,
// Redlock's allowance for clock drift, at most half the expire. A value
// below 0 or above half the expire, or any value on a Lock without
// expire, makes New return an error matching ErrInvalidArgument.
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

// WithTracking turns the watch on a held key on or off. With it on (the
// default) a tracker reads the key of each hold on a connection with Redis
// client-side caching (CLIENT TRACKING) on, so that Redis reports at once
// any change made by someone else (a Reset, a DEL, another owner's SET
// after the key expired, an eviction, a FLUSHALL; not a SWAPDB, for which
// Redis sends nothing): Done closes within milliseconds instead of at the
// next renewal. Each client has one tracker per Redis node in a process,
// shared by all its holds there: two connections of its own, kept 30
// seconds after the last hold ends (a server keeps at most four trackers
// without holds), and two goroutines, which run while it watches at least
// one hold and a second after. Each renewal or Extend costs one more GET.
//
// Where tracking cannot be set up (an ACL without HELLO, CLIENT ID, CLIENT
// SETNAME, CLIENT LIST, CLIENT TRACKING, SUBSCRIBE or the channel
// __redis__:invalidate; a proxy that refuses them; a client other than *redis.Client and
// *redis.ClusterClient) holds are not watched and a loss is found at the
// next renewal, or at the local deadline; Check reports it. With false,
// holds are never watched.
func WithTracking(on bool) Option {
	return func(c *config) { c.mark("WithTracking"); c.noTracking = !on }
}

// WithHashTag chooses the key scheme. With true the name is wrapped in a
// hash tag, "lock:{name}", "lock-signal:{name}", so that a lock's keys
// share one Redis Cluster slot; with false the keys are
// python-redis-lock's, "lock:name", "lock-signal:name".
//
// The default is hash-tagged keys exactly when the client is a
// *redis.ClusterClient. Give true for a cluster reached through another
// client type (a proxy). With false on a *redis.ClusterClient, New returns
// an error matching ErrInvalidArgument: python-redis-lock's keys hash to different slots and every
// script would fail with CROSSSLOT.
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
