package watch

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// trackers holds one tracker per (user client, node).
var trackers sync.Map // trackerKey -> *tracker

type trackerKey struct {
	client redis.UniversalClient
	addr   string // the node's address; "" for a *redis.Client
}

// Idle trackers, a few per server. A tracker whose last hold ended keeps
// its connections trackerIdle for the next hold of its client; but a
// process that makes a client per job (and closes it) would pile up two
// connections per job. So a server (address, user, database) keeps at most
// maxIdlePerServer trackers without holds (lingering or idle): when one
// more goes idle, the one idle the longest is closed.
var (
	idleMu sync.Mutex
	idleBy = map[serverID][]*tracker{} // oldest first
)

const maxIdlePerServer = 4

type serverID struct {
	network, addr, user string
	db                  int
}

// trackerFor returns the tracker of client for key: on a cluster, that of
// the key's master. It returns nil for a client it cannot track with.
func trackerFor(ctx context.Context, client redis.UniversalClient, key string) *tracker {
	var node *redis.Client
	switch c := client.(type) {
	case *redis.Client:
		node = c
	case *redis.ClusterClient:
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), trackerTimeout)
		defer cancel()
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil
		}
		node = n
	default:
		return nil
	}
	k := trackerKey{client: client}
	if _, ok := client.(*redis.ClusterClient); ok {
		k.addr = node.Options().Addr
	}
	if v, ok := trackers.Load(k); ok {
		return v.(*tracker)
	}
	opt := node.Options()
	t := &tracker{
		k:        k,
		server:   serverID{network: opt.Network, addr: opt.Addr, user: opt.Username, db: opt.DB},
		opt:      *opt,
		kick:     make(chan struct{}, 1),
		holds:    map[string]map[*Watch]uint64{},
		dirty:    map[string]struct{}{},
		expect:   map[string]time.Time{},
		armAt:    map[string]time.Time{},
		tracked:  map[string]bool{},
		spurious: map[string]int{},
		rereadAt: map[string]time.Time{},
	}
	v, _ := trackers.LoadOrStore(k, t)
	return v.(*tracker)
}

// becomeIdle puts t among the idle trackers of its server, closing the one
// idle the longest when there are more than maxIdlePerServer (at once, or
// as soon as its own lingering ends). One that watches holds again is
// skipped and dropped from the list.
func (t *tracker) becomeIdle() {
	idleMu.Lock()
	list := slices.DeleteFunc(idleBy[t.server], func(x *tracker) bool { return x == t })
	list = append(list, t)
	var old *tracker
	if len(list) > maxIdlePerServer {
		old, list = list[0], list[1:]
	}
	idleBy[t.server] = list
	idleMu.Unlock()
	if old == nil {
		return
	}
	old.mu.Lock()
	busy := len(old.holds) > 0 || old.closed
	running := old.running
	if !busy {
		old.retire = true
	}
	old.mu.Unlock()
	switch {
	case busy:
	case running:
		old.poke() // it exits and closes
	default:
		old.closeIdle()
	}
}

// forgetIdle takes t out of its server's idle trackers.
func forgetIdle(t *tracker) {
	idleMu.Lock()
	defer idleMu.Unlock()
	list := slices.DeleteFunc(idleBy[t.server], func(x *tracker) bool { return x == t })
	if len(list) == 0 {
		delete(idleBy, t.server)
	} else {
		idleBy[t.server] = list
	}
}

// closeIdle closes the connections of a tracker that watched nothing for
// trackerIdle and takes it out of the registry.
func (t *tracker) closeIdle() {
	t.mu.Lock()
	if t.running || len(t.holds) > 0 || t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	c := t.conns
	if t.idle != nil {
		t.idle.Stop()
	}
	t.conns, t.idle = nil, nil
	t.mu.Unlock()
	trackers.CompareAndDelete(t.k, t)
	forgetIdle(t)
	if c != nil {
		c.close()
	}
}
