package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// On a 3-master cluster: semaphores whose names spread over every master
// work end to end (hold, wait, wake, fencing, List, ResetAll), and every
// key of one name is in one slot. (A waiter's wake key, which exists only
// while an abandoned wait is woken, is its signal key with a suffix, in
// the same slot by construction.) Its
// broken variant is the mutation sem-key-untagged (.ci/mutations.txt): a
// size key without the tag, which the cluster refuses in the scripts
// (CROSSSLOT).
func TestSemaphoreCluster(t *testing.T) {
	t.Parallel()
	long(t, "starts a 3-node cluster")
	cl := redistest.StartCluster(t, 3)
	ctx := ctxT(t)
	cc := cl.Client(t)
	if _, err := redislock.NewSemaphore(cc, "a}b", 2); !errors.Is(err, redislock.ErrInvalidHashTag) {
		t.Fatalf("NewSemaphore(cluster, \"a}b\") = %v, want ErrInvalidHashTag", err)
	}
	names := namesOnEveryMaster(t, ctx, cc, "pool")
	for _, name := range names {
		var holders []*redislock.Permit
		sem := mustSemaphore(t, cc, name, 2, redislock.WithExpire(time.Minute), redislock.WithFencing())
		for range 2 {
			p, err := sem.Acquire(ctx)
			if err != nil {
				t.Fatalf("Acquire(%s) on the cluster: %v", name, err)
			}
			if p.Token() == 0 {
				t.Fatalf("%s: no fencing token", name)
			}
			holders = append(holders, p)
		}
		if err := holders[0].Extend(ctx, 2*time.Minute); err != nil {
			t.Fatalf("Extend(%s): %v", name, err)
		}
		waiterSem := mustSemaphore(t, cl.Client(t), name, 2, redislock.WithFencing())
		got := make(chan error, 1)
		wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		var waiter *redislock.Permit
		go func() {
			var err error
			waiter, err = waiterSem.Acquire(wctx)
			got <- err
		}()
		node, err := cc.MasterForKey(ctx, holders[0].Key())
		if err != nil {
			t.Fatal(err)
		}
		waitBlocked(t, node, 1)
		// Every key of the name that exists now is on that node, in the
		// holders key's slot.
		slot := redistest.Slot(holders[0].Key())
		keys := node.Keys(ctx, "*{"+name+"}*").Val()
		if len(keys) < 3 {
			t.Fatalf("keys of %s on its master: %v; want holders, size and fence keys", name, keys)
		}
		for _, k := range keys {
			if redistest.Slot(k) != slot {
				t.Fatalf("key %s is in slot %d, the holders key in %d", k, redistest.Slot(k), slot)
			}
		}
		if err := holders[1].Release(ctx); err != nil {
			t.Fatal(err)
		}
		err = <-got
		cancel()
		if err != nil {
			t.Fatalf("waiter of %s on the cluster: %v", name, err)
		}
		if waiter.Token() <= holders[1].Token() {
			t.Fatalf("waiter's token %d not above the earlier holder's %d", waiter.Token(), holders[1].Token())
		}
	}
	list, err := redislock.List(ctx, cc, "pool-*")
	if err != nil || len(list) != 2*len(names) {
		t.Fatalf("List on the cluster = %d entries, %v; want %d", len(list), err, 2*len(names))
	}
	n, err := redislock.ResetAll(ctx, cc)
	if err != nil || n != 2*len(names) {
		t.Fatalf("ResetAll on the cluster = %d, %v; want %d", n, err, 2*len(names))
	}
}

// On a 3-master cluster: RWMutexes whose names spread over every master
// work end to end (readers together, a writer waiting and woken by the
// last reader out, readers woken by the writer's release), and every key
// of one name is in one slot.
func TestRWMutexCluster(t *testing.T) {
	t.Parallel()
	long(t, "starts a 3-node cluster")
	cl := redistest.StartCluster(t, 3)
	ctx := ctxT(t)
	cc := cl.Client(t)
	names := namesOnEveryMaster(t, ctx, cc, "cfg")
	for _, name := range names {
		r1 := mustRWMutex(t, cc, name, redislock.WithFencing())
		r2 := mustRWMutex(t, cl.Client(t), name, redislock.WithFencing())
		for _, r := range []*rwParticipant{r1, r2} {
			if err := r.RLock(ctx); err != nil {
				t.Fatalf("RLock(%s) on the cluster: %v", name, err)
			}
		}
		w := mustRWMutex(t, cl.Client(t), name, redislock.WithFencing())
		got := make(chan error, 1)
		wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		go func() { got <- w.Lock(wctx) }()
		node, err := cc.MasterForKey(ctx, w.Key())
		if err != nil {
			t.Fatal(err)
		}
		waitBlocked(t, node, 1)
		r3 := mustRWMutex(t, cl.Client(t), name)
		r3got := make(chan error, 1)
		go func() { r3got <- r3.RLock(wctx) }() // behind the waiting writer
		waitBlocked(t, node, 2)
		slot := redistest.Slot(w.Key())
		keys := node.Keys(ctx, "*{"+name+"}*").Val()
		if len(keys) < 4 {
			t.Fatalf("keys of %s on its master: %v; want readers, waiting writers and readers, fence", name, keys)
		}
		for _, k := range keys {
			if redistest.Slot(k) != slot {
				t.Fatalf("key %s is in slot %d, the writer key in %d", k, redistest.Slot(k), slot)
			}
		}
		for _, r := range []*rwParticipant{r1, r2} {
			if err := r.RUnlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-got; err != nil {
			t.Fatalf("writer of %s on the cluster: %v", name, err)
		}
		if w.Token() <= r2.Token() {
			t.Fatalf("writer's token %d not above the readers' %d", w.Token(), r2.Token())
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		err = <-r3got
		cancel()
		if err != nil {
			t.Fatalf("reader behind the writer on the cluster: %v", err)
		}
		r3.RUnlock(ctx)
	}
	// Writers that give up on a cluster client return at once, their
	// wait finished behind them: the registration each takes back must
	// not be made again by that wait's try after it (no ghost writer,
	// which would keep readers out for a slice and a second).
	holder := mustRWMutex(t, cc, names[0])
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for round := range 8 {
		quitter := mustRWMutex(t, cl.Client(t), names[0])
		qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := quitter.Lock(qctx)
		cancel()
		if !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("round %d: a Lock that gave up = %v", round, err)
		}
		if err := quitter.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		if info, err := holder.Info(ctx); err != nil || info.WaitingWriters != 0 {
			t.Fatalf("round %d: %+v, %v after the writer gave up; want no waiting writer", round, info, err)
		}
	}
	holder.Unlock(ctx)
}

// namesOnEveryMaster returns names base-0, base-1, ... until the locks
// of those names (their keys' hash tag) are on every master of the
// 3-master cluster of cc.
func namesOnEveryMaster(t *testing.T, ctx context.Context, cc *redis.ClusterClient, base string) []string {
	t.Helper()
	masters := map[string]bool{}
	var names []string
	for i := 0; len(masters) < 3; i++ {
		name := fmt.Sprintf("%s-%d", base, i)
		m, err := cc.MasterForKey(ctx, "{"+name+"}")
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
		names = append(names, name)
	}
	return names
}
