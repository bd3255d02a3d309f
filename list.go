package redislock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
)

// LockInfo describes one hold, as List and Status find it.
type LockInfo struct {
	Name  string        // the lock's name, without the prefix
	Key   string        // its Redis key
	Owner string        // the id stored in the key
	TTL   time.Duration // remaining time to live; negative when the key never expires
	Kind  Kind          // which primitive holds
	Size  int           // a semaphore's size; 0 for the others
}

// Kind says which primitive a LockInfo describes.
type Kind string

// The kinds of LockInfo.
const (
	KindLock      Kind = "lock"
	KindSemaphore Kind = "semaphore"
	KindWriter    Kind = "writer" // an RWMutex held for writing
	KindReader    Kind = "reader" // one reader of an RWMutex
)

// List returns every hold under the key prefix (WithKeyPrefix; by default
// "lock:") whose name matches the glob namePattern ("*" or "" for all),
// sorted by name, kind and owner. Like ResetAll, it walks the keys with
// SCAN on every master; a lock released meanwhile is left out. It changes
// nothing but dropping expired semaphore holders. It takes WithKeyPrefix
// and WithHashTag; any other option is an error matching
// ErrInvalidArgument.
func List(ctx context.Context, client redis.UniversalClient, namePattern string, opts ...Option) ([]LockInfo, error) {
	ks, _, err := adminConfig(client, opts, "List", "WithKeyPrefix", "WithHashTag")
	if err != nil {
		return nil, err
	}
	if namePattern == "" {
		namePattern = "*"
	}
	var (
		mu    sync.Mutex
		infos = map[string]LockInfo{} // by name: a key moved by a slot migration is found twice
	)
	err = eachLockKey(ctx, client, ks, namePattern, func(ctx context.Context, name string) error {
		var (
			info LockInfo
			held bool
		)
		err := topology.Do(ctx, client, func() (err error) {
			info, held, err = readInfo(ctx, client, name, ks.LockKey(name))
			return err
		})
		if err != nil || !held { // not held: released meanwhile
			return err
		}
		mu.Lock()
		infos[string(KindLock)+"\x00"+name] = info
		mu.Unlock()
		return nil
	})
	if err == nil {
		err = eachSemaphore(ctx, client, ks, namePattern, func(ctx context.Context, name string) error {
			keys, _ := ks.SemKeys(name)
			holders, err := readHolders(ctx, client, name, keys)
			if err != nil {
				return err
			}
			mu.Lock()
			for _, h := range holders {
				infos[string(KindSemaphore)+"\x00"+name+"\x00"+h.Owner] = h
			}
			mu.Unlock()
			return nil
		})
	}
	if err == nil {
		err = eachRWMutex(ctx, client, ks, namePattern, func(ctx context.Context, name string) error {
			keys, _ := ks.RWKeys(name)
			rw, err := readRWInfo(ctx, client, name, keys)
			if err != nil {
				return err
			}
			mu.Lock()
			for _, h := range rw.Holders {
				infos[string(h.Kind)+"\x00"+name+"\x00"+h.Owner] = h
			}
			mu.Unlock()
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("redislock: list: %w", err)
	}
	list := slices.Collect(maps.Values(infos))
	slices.SortFunc(list, func(a, b LockInfo) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Owner, b.Owner))
	})
	return list, nil
}

// A Status is who holds a Lock, a Semaphore or an RWMutex, and who waits
// for it, as their Status method reads it: Holders as List describes them
// (none for a free Lock).
type Status struct {
	Holders []LockInfo
	// An RWMutex's waiters (0 for the others): writers and readers
	// waiting, and readers a writer's release let in that have yet to come
	// in (no writer gets in until they have). Each reader count stands for
	// one client's readers.
	WaitingWriters, WaitingReaders, AdmittedReaders int
}

// Status reads who holds the lock and for how long, in one round trip.
func (l *Lock) Status(ctx context.Context) (Status, error) {
	info, held, err := readInfo(ctx, l.client, l.name, l.keys[0])
	if err != nil {
		return Status{}, l.wrap(fmt.Errorf("status: %w", err))
	}
	if !held {
		return Status{}, nil
	}
	return Status{Holders: []LockInfo{info}}, nil
}

// readInfo reads the owner and TTL of the lock key of name on node.
func readInfo(ctx context.Context, node redis.UniversalClient, name, key string) (LockInfo, bool, error) {
	info := LockInfo{Name: name, Key: key, Kind: KindLock}
	var owner *redis.StringCmd
	var ttl *redis.DurationCmd
	_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		owner = p.Get(ctx, key)
		ttl = p.PTTL(ctx, key)
		return nil
	})
	switch {
	case errors.Is(err, redis.Nil):
		return info, false, nil
	case err != nil:
		return info, false, err
	}
	info.Owner, info.TTL = owner.Val(), ttl.Val()
	if info.TTL < 0 {
		info.TTL = -1
	}
	return info, true, nil
}
