// Package redislock is a distributed lock on Redis that speaks
// python-redis-lock's protocol, so Go and Python processes can hold and wait
// on the same locks.
//
// # Using it
//
//	l, err := redislock.New(client, "reports") // 30 s expire, renewed while held
//	if err != nil { ... }                        // bad arguments only (ErrInvalidArgument); nothing was sent
//	if err := l.Acquire(ctx); err != nil { ... } // ErrLocked + ctx's error: held elsewhere until ctx ended; ErrUnreachable: Redis did not answer
//	defer l.Release(ctx)                         // sent even when ctx has ended, under a grace of its own
//
// TryAcquire takes the lock only if it is free (ErrLocked when busy). Do
// runs a function under the lock with a context cancelled when the lock is
// lost, and releases it afterwards:
//
//	err := l.Do(ctx, func(ctx context.Context) error {
//		return job(ctx) // ctx is cancelled, cause ErrLost, if the lock is lost
//	})
//
// A *Lock shared by goroutines is a sync.Mutex: they take turns, and a hold
// is released only by its own Release. Locker adapts it to sync.Locker.
// Extend pushes the expire back; Locked and OwnerID say whether and by whom
// it is held; Reset and ResetAll force locks free.
//
// # What can go wrong
//
// A held lock can be lost: its key expired (renewal kept failing), was
// deleted (a Reset) or taken by another owner. Done closes and Err returns
// an error matching ErrLost and the reason (ErrExpired, ErrTakenOver,
// ErrUnreachable, ...), within milliseconds of the change when Redis allows
// key tracking (see Check), and a safety margin before the key could
// expire when renewals fail. Stop working on the protected resource then.
//
// A TTL lock cannot stop a holder that was paused past its expire (a long
// GC pause, SIGSTOP, a frozen VM) from carrying on after another owner took
// the lock, nor survive a failover to a replica that had not received the
// key, nor an eviction under a maxmemory-policy other than noeviction.
// WithFencing gives each grant a growing token for the resource to check;
// WithReplicaAck waits for replicas; Check reports what makes locks unsafe
// on a deployment.
//
// # Defaults
//
// With no options a lock expires 30 s (DefaultExpire) after its holder
// stops renewing it: a dead holder frees it, a long job keeps it.
// WithExpire(d) alone is python-redis-lock's expire=d, without renewal
// unless WithAutoRenewal; WithExpire(0) is python-redis-lock's default, a
// key that never expires. Keys are python-redis-lock's: "lock:<name>"
// holding the owner's id, and the list "lock-signal:<name>" a release
// pushes to wake one waiter, which sleeps in BLPOP meanwhile: nothing
// polls.
//
// # The family, and more
//
// Semaphore (at most N holders) and RWMutex (sync.RWMutex across
// processes) run on the Lock's machinery with keys of their own. WithLogger
// writes events through log/slog with python-redis-lock's logger names;
// WithObserver hands them to funcs of yours (the module redislockotel
// records OpenTelemetry metrics and spans). Package cache computes a
// missing value once across processes, on python-redis-lock's get_or_set
// lock; package redislocktest makes held locks lost in tests.
//
// # Contexts and connections
//
// Every call that talks to Redis takes a context. An Acquire returns
// within a round trip of its context's end, whatever the client's options;
// set the client option ContextTimeoutEnabled so that deadlines bound the
// other commands too. Waiting runs on connections the package opens beside
// your client (at most 8 per client and node), never on your pool; the key
// watch has two more. They close 30 s after they were last needed;
// Shutdown closes them at once.
//
// The README and docs/ in the repository say the rest: the protocol, the
// topologies, the figures.
package redislock
