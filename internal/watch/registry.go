package watch

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
)

// Idle trackers, a few per server. A tracker whose last hold ended keeps
// its connections trackerIdle for the next hold of its client; but a
// process that makes a client per job (and closes it) would pile up two
// connections per job. So a server (address, user, database) keeps at most
// maxIdlePerServer trackers without holds: when one more goes idle, the
// one idle the longest is closed. A tracker still lingering (its last hold
// ended less than runLinger ago) counts only once its client has no
// connection left (closed): clients that take turns on a lock, each
// waiting while another holds, keep theirs however many they are (8
// clients, each idle in turn for a few holds, retired one another's
// trackers: two new connections and a set-up per hold, 38 % of the
// process's CPU under contention).
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
	if !registry.Keyable(client) {
		return nil
	}
	k := registry.Key{Kind: registry.Tracker, Client: client}
	if _, ok := client.(*redis.ClusterClient); ok {
		k.Sub = node.Options().Addr
	}
	if v, ok := registry.Load(k); ok {
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
	v, _ := registry.LoadOrStore(k, t)
	return v.(*tracker)
}

// becomeIdle closes the tracker of t's server that has been without holds
// the longest, when more than maxIdlePerServer are (at once, or as soon as
// its own lingering ends).
func (t *tracker) becomeIdle() {
	var old *tracker
	var oldest time.Time
	n := 0
	registry.Range(registry.Tracker, func(_ registry.Key, v any) bool {
		x := v.(*tracker)
		if x.server != t.server {
			return true
		}
		if since := x.idleSince(); !since.IsZero() {
			n++
			if old == nil || since.Before(oldest) {
				old, oldest = x, since
			}
		}
		return true
	})
	if n <= maxIdlePerServer {
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

// idleSince is when t was left without holds, if it counts against its
// server's idle trackers (see maxIdlePerServer): not while it has holds,
// is closed or retiring, nor while it lingers for a client in use.
func (t *tracker) idleSince() time.Time {
	t.mu.Lock()
	since := t.emptySince
	if len(t.holds) > 0 || t.closed || t.retire {
		since = time.Time{}
	}
	t.mu.Unlock()
	if !since.IsZero() && time.Since(since) < runLinger && !unused(t.k.Client) {
		return time.Time{} // lingering for a client in use
	}
	return since
}

// unused reports whether client has no connection in its pool: it was
// closed (or has not been used since its connections were reaped).
func unused(client redis.UniversalClient) bool {
	st := client.PoolStats()
	return st == nil || st.TotalConns == 0
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
	registry.CompareAndDelete(t.k, t)
	if c != nil {
		c.close()
	}
}
