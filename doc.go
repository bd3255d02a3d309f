// Package redislock is a distributed lock on Redis that speaks
// python-redis-lock's protocol, so Go and Python processes can hold and wait
// on the same locks.
//
// # Using it
//
//	l, err := redislock.New(client, "reports", redislock.WithExpire(30*time.Second))
//	if err != nil { ... }                 // bad arguments only; nothing was sent
//	if err := l.Acquire(ctx); err != nil { ... } // ErrLocked + ctx error when ctx ends while held elsewhere; ErrUnreachable when Redis does not answer
//	defer l.Release(context.WithoutCancel(ctx))
//
// TryAcquire takes the lock only if it is free. Extend pushes the expire
// back, Locked and OwnerID say whether and by whom it is held, Reset and
// ResetAll force locks free.
//
// Do runs a function under the lock with a context that is cancelled when
// the loss of the lock is noticed (see below), and releases it afterwards:
//
//	err := l.Do(ctx, func(ctx context.Context) error {
//		return job(ctx) // ctx is cancelled, cause ErrLost, if the lock is lost
//	})
//
// Locker adapts a Lock to sync.Locker for code written against sync.Mutex.
//
// # The family
//
// Semaphore (at most N holders, each permit expiring on its own by the
// Redis server's clock) and RWMutex (sync.RWMutex across processes, with
// writer preference, each reader expiring and renewed on its own) run on
// the Lock's machinery: the same waiting in BLPOP with the next try
// pipelined behind it, local wait queue, holds with Done and Err, renewal,
// giveback after a lost reply, fencing and replica acknowledgement. Their
// keys are their own, hash-tagged with the name; python-redis-lock has
// neither.
//
// # Holding and losing
//
// WithAutoRenewal keeps a held lock alive: a goroutine extends the key
// every two thirds of the expire less the safety margin, until Release
// stops it (and waits for it). While a lock is held its key is watched with
// Redis client-side caching (WithTracking, on by default): a Reset, a DEL or
// another owner's SET ends the hold within milliseconds. Every hold also
// keeps a validity deadline on the local monotonic clock, counted from
// when the acquire or the last successful renewal was sent, and counts as
// lost a safety margin (WithSafetyMargin) before it, while the key is
// still its own. When the watch or a renewal finds the key gone or someone
// else's, or no renewal succeeds before the deadline, or (without renewal)
// the deadline passes, the hold is lost: Done closes, Err returns ErrLost
// with the reason, nothing is renewed again and the key is never
// recreated. Where Redis refuses tracking (see Check), a change between two
// renewals is noticed at the next one.
//
// # Observing, caching, testing
//
// WithLogger writes a Lock's events through log/slog, with
// python-redis-lock's logger names; WithObserver hands them to an Observer
// (the module redislockotel records OpenTelemetry metrics and spans).
// Default owner ids say which host and process hold a lock (ParseOwner).
//
// Package cache computes a missing value once across every process, on
// the lock python-redis-lock's locked_get_or_set takes
// ("get_or_set:<key>"), and stores it only while that lock is still its
// own.
//
// The package redislocktest gives tests a Redis (in-process or real) and
// makes held locks lost, stolen, expired or unreachable, as production
// would.
//
// # Protocol
//
// The lock named "reports" is the string key "lock:reports" holding the
// owner's id, with the lock's expire as its TTL (30 s, renewed while held,
// unless WithExpire says otherwise; none with WithExpire(0)).
// Waiters sleep in BLPOP on the list "lock-signal:reports"; a release
// deletes the lock key and pushes one element onto that list (which expires
// after the signal expire, 1 s by default), waking exactly one waiter.
// Acquire, release, extend and reset are Lua scripts that compare the
// stored id before acting, so no owner can release or extend another's
// lock. Nothing is polled: a waiter costs Redis one command per slice of at
// most two seconds, and its slice never outlasts the holder's remaining
// TTL, so the waiters of a holder that died wake when its key expires.
//
// # What the lock guarantees
//
// On one Redis server whose maxmemory-policy is noeviction, at most one
// owner holds a lock at a time, as long as each holder finishes (or
// extends) before its expire runs out. Release and Extend never act on a
// lock that another owner holds. A lock without expire is held until it is
// released or reset, even if its holder dies.
//
// # What it cannot guarantee
//
// A TTL lock cannot stop a holder that was paused past its expire (a long
// GC pause, SIGSTOP, a frozen VM) from carrying on as if it still held the
// lock after another owner took it. Nor can it survive a failover to a
// replica that had not received the lock key yet, or an eviction of the key
// under a maxmemory policy other than noeviction. Protect resources that
// must never see two writers with a check of their own, and keep expires
// well above the longest pause you expect.
//
// # Contexts
//
// Every call that talks to Redis takes a context. An Acquire returns
// within a round trip of its context's end, whatever the client's options
// (within 50 ms when Redis does not answer): what its wait took meanwhile
// is undone in the background (see Settle). Without the client
// option ContextTimeoutEnabled, go-redis does not interrupt other commands
// when their context ends; set it so that deadlines bound them.
//
// # Connections
//
// Everything but waiting goes through the client you pass. A blocking
// acquire waits (BLPOP) on connections the package opens beside your
// client, from its options, so that a wait never holds a connection of your
// pool: at most 8 per client on a single node or under Sentinel, however
// many names are waited for, and one per name with waiters on a cluster.
// The key watch (WithTracking) has two more per client and node. They
// close 30 seconds after they were last needed; Shutdown closes them at
// once.
package redislock
