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

// LockInfo describes a held lock, or one holder of a semaphore, as List
// finds it.
type LockInfo struct {
	Name  string        // the lock's name, without the prefix
	Key   string        // its Redis key
	Owner string        // the id stored in the key
	TTL   time.Duration // remaining time to live; negative when the key never expires
	Kind  Kind          // KindLock, or KindSemaphore for a semaphore's holder
	Size  int           // a semaphore's size; 0 for a lock
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

// List returns every lock held under the key prefix (WithKeyPrefix; by
// default "lock:") whose name matches the glob namePattern ("*" or "" for
// all), every holder of a semaphore of such a name (one LockInfo per
// holder, Kind KindSemaphore), and the writer and each reader of an
// RWMutex of such a name (KindWriter, KindReader), sorted by name, then
// kind, then owner. Like
// ResetAll, it walks the keys with SCAN on every master and looks only at
// string keys (locks) and sorted sets (semaphores' holders). It takes
// WithKeyPrefix and WithHashTag; any other option is refused (an error
// matching ErrInvalidArgument). It changes nothing but dropping
// semaphore holders that expired, as every semaphore script does. A lock
// released while List runs is left out.
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
			holders, size, err := readHolders(ctx, client, keys)
			if err != nil {
				return err
			}
			mu.Lock()
			for _, h := range holders {
				infos[string(KindSemaphore)+"\x00"+name+"\x00"+h.ID] = LockInfo{
					Name: name, Key: keys[0], Owner: h.ID, TTL: h.TTL, Kind: KindSemaphore, Size: size}
			}
			mu.Unlock()
			return nil
		})
	}
	if err == nil {
		err = eachRWMutex(ctx, client, ks, namePattern, func(ctx context.Context, name string) error {
			keys, _ := ks.RWKeys(name)
			rw, err := readRWInfo(ctx, client, keys)
			if err != nil {
				return err
			}
			mu.Lock()
			if rw.Writer != "" {
				infos[string(KindWriter)+"\x00"+name] = LockInfo{Name: name, Key: keys[0], Owner: rw.Writer, TTL: rw.WriterTTL, Kind: KindWriter}
			}
			for _, h := range rw.Readers {
				infos[string(KindReader)+"\x00"+name+"\x00"+h.ID] = LockInfo{Name: name, Key: keys[2], Owner: h.ID, TTL: h.TTL, Kind: KindReader}
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

// Info reads who holds the lock and for how long, in one round trip. held
// is false, and info has only Name and Key, when the lock is free.
func (l *Lock) Info(ctx context.Context) (info LockInfo, held bool, err error) {
	info, held, err = readInfo(ctx, l.client, l.name, l.keys[0])
	if err != nil {
		return info, false, l.wrap(fmt.Errorf("info: %w", err))
	}
	return info, held, nil
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
