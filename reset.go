package redislock

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// scanCount is the COUNT hint of each SCAN step in ResetAll.
const scanCount = 1000

// Reset deletes the lock key whoever holds it and wakes one waiter, as
// python-redis-lock's reset; the holder is not told, and its Release
// returns ErrNotAcquired. It returns how many holds it dropped: 1, or 0 for
// a free lock.
func (l *Lock) Reset(ctx context.Context) (int, error) {
	var deleted int
	err := topology.Do(ctx, l.client, func() (err error) {
		deleted, err = wire.Reset.Run(ctx, l.client, l.keys, l.signalExpireMS, l.turnMS).Int()
		return err
	})
	l.ev.reset(ctx, l.info(""), deleted, err)
	if err != nil {
		return 0, l.wrap(fmt.Errorf("reset: %w", err))
	}
	return deleted, nil
}

// ResetAll resets every lock, Semaphore and RWMutex under the key prefix
// (WithKeyPrefix, taken literally; by default "lock:") as their Reset does,
// walking the keyspace with SCAN on every master. It returns how many lock
// keys it deleted and holds it dropped; on a Redis error, the count so far
// with the error. Locks taken meanwhile may or may not be reset. It takes
// WithKeyPrefix, WithSignalExpire, WithHashTag and WithLogger; any other
// option, or a bad value, is an error matching ErrInvalidArgument, with
// nothing sent.
func ResetAll(ctx context.Context, client redis.UniversalClient, opts ...Option) (int, error) {
	ks, c, err := adminConfig(client, opts, "ResetAll", "WithKeyPrefix", "WithSignalExpire", "WithHashTag", "WithLogger")
	if err != nil {
		return 0, err
	}
	// A lock reset twice (see eachLockKey) counts once: the second run
	// finds no key.
	signalExpireMS := strconv.FormatInt(c.signalExpire.Milliseconds(), 10)
	turnMS := turnFor(c.signalExpire)
	var (
		mu    sync.Mutex
		total int
	)
	err = eachLockKey(ctx, client, ks, "*", func(ctx context.Context, name string) error {
		keys := []string{ks.LockKey(name), ks.SignalKey(name), ks.TurnKey(name)}
		var deleted int
		err := topology.Do(ctx, client, func() (err error) {
			deleted, err = wire.Reset.Run(ctx, client, keys, signalExpireMS, turnMS).Int()
			return err
		})
		if err != nil {
			return err
		}
		mu.Lock()
		total += deleted
		mu.Unlock()
		return nil
	})
	if err == nil {
		err = eachSemaphore(ctx, client, ks, "*", func(ctx context.Context, name string) error {
			keys, _ := ks.SemKeys(name)
			dropped, err := resetSemaphore(ctx, client, keys, signalExpireMS)
			if err != nil {
				return err
			}
			mu.Lock()
			total += dropped
			mu.Unlock()
			return nil
		})
	}
	if err == nil {
		done := map[string]bool{} // a name found by both its keys is reset once
		err = eachRWMutex(ctx, client, ks, "*", func(ctx context.Context, name string) error {
			mu.Lock()
			seen := done[name]
			done[name] = true
			mu.Unlock()
			if seen {
				return nil
			}
			keys, _ := ks.RWKeys(name)
			dropped, err := resetRWMutex(ctx, client, keys, signalExpireMS)
			if err != nil {
				return err
			}
			mu.Lock()
			total += dropped
			mu.Unlock()
			return nil
		})
	}
	newEvents(nil, c.logger).reset(ctx, Event{}, total, err)
	if err != nil {
		return total, fmt.Errorf("redislock: reset all: %w", err)
	}
	return total, nil
}

// adminConfig checks the client and options of a package-level call.
// call names it in errors, and takes lists the options it uses: any
// other is refused.
func adminConfig(client redis.UniversalClient, opts []Option, call string, takes ...string) (wire.Scheme, config, error) {
	if isNil(client) {
		return wire.Scheme{}, config{}, ErrNilClient
	}
	if err := checkClient(client); err != nil {
		return wire.Scheme{}, config{}, err
	}
	c := newConfig(opts)
	if err := c.only(call, takes...); err != nil {
		return wire.Scheme{}, c, err
	}
	if err := c.validate(); err != nil {
		return wire.Scheme{}, c, err
	}
	tagged, err := c.tagged(client)
	if err != nil {
		return wire.Scheme{}, c, err
	}
	ks := wire.NewScheme(c.prefix, tagged)
	if err := checkName(ks, ""); err != nil {
		return wire.Scheme{}, c, err
	}
	return ks, c, nil
}

// eachLockKey calls fn with the name of every lock key of scheme ks whose
// name matches the glob namePattern, walking the keyspace with SCAN on
// client, or on every master of a cluster client (concurrently: fn must be
// safe for that). It stops at the first error.
//
// fn must send its commands through client, not to the node that SCAN
// found the key on: while a slot migrates, a key may be on the importing
// node, which answers MOVED to a client that did not send ASKING, and the
// cluster client follows that. For the same reason fn may see a name
// twice (found on the migrating node, then moved and found again).
func eachLockKey(ctx context.Context, client redis.UniversalClient, ks wire.Scheme, namePattern string,
	fn func(ctx context.Context, name string) error) error {
	return eachKey(ctx, client, ks.ScanPattern(namePattern), "string", ks.NameOf, fn)
}

// eachSemaphore is eachLockKey for the semaphores of scheme ks: it calls
// fn with the name of every semaphore that has a holders key.
func eachSemaphore(ctx context.Context, client redis.UniversalClient, ks wire.Scheme, namePattern string,
	fn func(ctx context.Context, name string) error) error {
	return eachKey(ctx, client, ks.SemScanPattern(namePattern), "zset", ks.SemNameOf, fn)
}

// eachRWMutex is eachLockKey for the RWMutexes of scheme ks: it calls fn
// with the name of every RWMutex that has a writer key or a readers key
// (a name may come twice).
func eachRWMutex(ctx context.Context, client redis.UniversalClient, ks wire.Scheme, namePattern string,
	fn func(ctx context.Context, name string) error) error {
	writers, readers := ks.RWScanPatterns(namePattern)
	if err := eachKey(ctx, client, writers, "string", ks.RWNameOf, fn); err != nil {
		return err
	}
	return eachKey(ctx, client, readers, "zset", ks.RWReaderNameOf, fn)
}

// eachKey calls fn with nameOf of every key of type typ that matches the
// SCAN pattern, where nameOf says it is one (see eachLockKey).
func eachKey(ctx context.Context, client redis.UniversalClient, pattern, typ string,
	nameOf func(key string) (string, bool), fn func(ctx context.Context, name string) error) error {
	walk := func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.ScanType(ctx, 0, pattern, scanCount, typ).Iterator()
		for iter.Next(ctx) {
			name, ok := nameOf(iter.Val())
			if !ok {
				continue
			}
			if err := fn(ctx, name); err != nil {
				return err
			}
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		return nil
	}
	if cluster, ok := client.(*redis.ClusterClient); ok {
		// Every master, also one that serves no slot yet but imports one
		// (ForEachMaster would skip it, and the keys moved there).
		masters, dones, err := topology.ClusterMasters(ctx, cluster)
		if err != nil {
			return err
		}
		defer func() {
			for _, done := range dones {
				done()
			}
		}()
		g := make(chan error, len(masters))
		for _, m := range masters {
			go func() { g <- walk(ctx, m) }()
		}
		var first error
		for range masters {
			if err := <-g; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	return walk(ctx, client)
}
