// Package redislock is a distributed lock on Redis that speaks
// python-redis-lock's protocol, so Go and Python processes can hold and wait
// on the same locks.
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
// A *Lock shared by goroutines is a sync.Mutex. Semaphore (at most N
// holders) and RWMutex (sync.RWMutex across processes) work the same way,
// with keys of their own.
//
// # What can go wrong
//
// A held lock can be lost: its key expired (renewal kept failing), was
// deleted (a Reset) or taken by another owner. Done closes and Err returns
// an error matching ErrLost and the reason. Stop working on the protected
// resource then.
//
// A TTL lock cannot stop a holder that was paused past its expire (a long
// GC pause, SIGSTOP, a frozen VM) from carrying on after another owner took
// the lock, nor survive a failover to a replica that had not received the
// key, nor an eviction under a maxmemory-policy other than noeviction.
// WithFencing gives each grant a growing token for the resource to check;
// WithReplicaAck waits for replicas; Check reports what makes locks unsafe
// on a deployment.
//
// # Contexts and connections
//
// Every call that talks to Redis takes a context. A wait in Acquire ends
// within a round trip of its context's end, whatever the client's options;
// its tries and every other command are bounded by the context only with
// the client option ContextTimeoutEnabled (else by its read timeout). Waiting runs on connections the package opens beside
// your client (at most 8 per client and node), never on your pool; the key
// watch has two more. They close 30 s after they were last needed;
// Shutdown closes them at once.
//
// Packages cache and redislocktest, and the module redislockotel, build on
// it; the README and docs/ in the repository say the rest.
package redislock
