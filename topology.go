package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topology changes.
//
// While a Redis Cluster moves a slot, or fails a shard over, Redis answers
// some commands with an error reply that means "not here" or "not now":
//
//   - MOVED: the slot is served by another node now;
//   - ASK: the slot is migrating and this key is already on the importing
//     node, which serves it to a client that sends ASKING first;
//   - TRYAGAIN: a command on several keys of a migrating slot, some of them
//     on each side (the release script touches the lock key and the
//     usually missing signal list, so it meets this for the whole
//     migration);
//   - CLUSTERDOWN: no node serves the slot (a failover is under way);
//   - READONLY and LOADING: the node became a replica, or is loading.
//
// None of them ran the command. go-redis's ClusterClient follows MOVED and
// ASK itself, but retries the others only a few times (MaxRedirects: 40 to
// 90 ms in all), and a pipeline sent to one node, as WithReplicaAck must
// (WAIT counts the writes of its own connection), sees even MOVED and ASK
// raw. So every command of a Lock goes through retryTopology: such a reply
// is retried, with a short backoff, for as long as the call's context
// allows, but no longer than topologyPatience. A slot left migrating by an
// operator (a resharding that died halfway) would otherwise hold a call
// for ever.

// topologyPatience bounds how long one call retries the replies above (a
// variable for the tests).
var topologyPatience = 10 * time.Second

// Backoff between retries of a topology reply.
const (
	minTopologyBackoff = 2 * time.Millisecond
	maxTopologyBackoff = 100 * time.Millisecond
)

// topoKind classifies an error reply that says the command did not run
// because the topology is changing.
type topoKind int

const (
	topoNone     topoKind = iota
	topoMoved             // MOVED slot addr
	topoAsk               // ASK slot addr
	topoTryAgain          // TRYAGAIN, CLUSTERDOWN, LOADING, UNBLOCKED
	topoReadOnly          // READONLY: a master demoted by a failover
)

// topology classifies err, and returns the address of a MOVED or ASK.
func topology(err error) (topoKind, string) {
	if err == nil || !isReply(err) {
		return topoNone, ""
	}
	msg := err.Error()
	for _, p := range [...]struct {
		prefix string
		kind   topoKind
	}{
		{"MOVED ", topoMoved},
		{"ASK ", topoAsk},
		{"TRYAGAIN", topoTryAgain},
		{"CLUSTERDOWN", topoTryAgain},
		{"LOADING", topoTryAgain},
		{"UNBLOCKED", topoTryAgain},
		{"READONLY", topoReadOnly},
	} {
		if rest, ok := strings.CutPrefix(msg, p.prefix); ok {
			addr := ""
			if p.kind == topoMoved || p.kind == topoAsk {
				if f := strings.Fields(rest); len(f) == 2 {
					addr = f[1]
				}
			}
			return p.kind, addr
		}
	}
	return topoNone, ""
}

// isTopology reports whether err is one of the replies above.
func isTopology(err error) bool {
	k, _ := topology(err)
	return k != topoNone
}

// topoRetry paces the retries of one call (see retryTopology).
type topoRetry struct {
	start time.Time
	wait  time.Duration
}

// again reports whether the call that got err should be sent again, after
// waiting; false when err is no topology reply, or ctx or the patience
// ran out. Before a retry it has a cluster client reload its slot map when
// the reply says the map is stale (MOVED, READONLY), or a node stopped
// answering (a failover: the client would otherwise dial the dead master
// until its next periodic reload).
func (r *topoRetry) again(ctx context.Context, client redis.UniversalClient, err error) bool {
	kind, _ := topology(err)
	switch kind {
	case topoNone:
		return false
	case topoMoved, topoReadOnly:
		refreshSlots(ctx, client)
	}
	if r.start.IsZero() {
		r.start = time.Now()
	}
	r.wait = min(max(r.wait*2, minTopologyBackoff), maxTopologyBackoff)
	if time.Since(r.start)+r.wait > topologyPatience {
		return false
	}
	return sleepCtx(ctx, r.wait)
}

// retryTopology calls op until its error is no topology reply, within ctx
// and topologyPatience (see topoRetry). It returns op's last error.
func retryTopology(ctx context.Context, client redis.UniversalClient, op func() error) error {
	var r topoRetry
	for {
		err := op()
		if !r.again(ctx, client, err) {
			return err
		}
	}
}

// sleepCtx waits d, or less when ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// refreshSlots has a cluster client reload its slot map (in the
// background: go-redis does at most one reload at a time, and pauses 200
// ms after each). Other clients need nothing.
func refreshSlots(ctx context.Context, client redis.UniversalClient) {
	if c, ok := client.(*redis.ClusterClient); ok {
		c.ReloadState(ctx)
	}
}

// noteConnError is called after a command of a Lock failed without a
// reply: on a cluster the node may be gone (a failover), and the slot map
// is reloaded so that the next attempt goes to the new master.
func noteConnError(ctx context.Context, client redis.UniversalClient, err error) {
	if err != nil && !isReply(err) && !errors.Is(err, context.Canceled) {
		refreshSlots(ctx, client)
	}
}

// route is where the next attempt of a pipeline to one key's node goes:
// the key's master as the cluster client knows it, or the node of the last
// MOVED or ASK (with ASKING before each command of the key) until it too
// redirects. Only pipelines sent to one node (WithReplicaAck) need it; a
// ClusterClient routes everything else itself.
type route struct {
	addr   string
	asking bool
}

// node returns the client for the next attempt on key, whether each of
// its commands on the key must follow an ASKING, and a func to call when
// done with the client.
func (r *route) node(ctx context.Context, client redis.UniversalClient, key string) (redis.UniversalClient, bool, func(), error) {
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		return client, false, func() {}, nil
	}
	if r.addr != "" {
		n, done := nodeClient(ctx, cluster, r.addr)
		return n, r.asking, done, nil
	}
	n, err := cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, false, nil, err
	}
	return n, false, func() {}, nil
}

// follow records where the reply err sends the next attempt.
func (r *route) follow(err error) {
	switch kind, addr := topology(err); kind {
	case topoMoved:
		r.addr, r.asking = addr, false
	case topoAsk:
		r.addr, r.asking = addr, true
	default:
		r.addr, r.asking = "", false
	}
}

// nodeClient returns a client of the cluster node at addr and a func to
// call when done with it: the cluster client's own when its slot map (here
// reloaded) has the node; else, for a node that serves no slot yet (one
// added, and importing its first slot), a client of its own with the
// cluster's options, closed by the func.
func nodeClient(ctx context.Context, cluster *redis.ClusterClient, addr string) (*redis.Client, func()) {
	var (
		mu    sync.Mutex
		found *redis.Client
	)
	_ = cluster.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
		if n.Options().Addr == addr {
			mu.Lock()
			found = n
			mu.Unlock()
		}
		return nil
	})
	if found != nil {
		return found, func() {}
	}
	n := redis.NewClient(nodeOptions(cluster.Options(), addr))
	return n, func() { n.Close() }
}

// nodeOptions returns the options of a client of the node at addr of a
// cluster with options o, as go-redis makes them for its own nodes.
func nodeOptions(o *redis.ClusterOptions, addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ClientName:            o.ClientName,
		Dialer:                o.Dialer,
		OnConnect:             o.OnConnect,
		Username:              o.Username,
		Password:              o.Password,
		MaxRetries:            o.MaxRetries,
		MinRetryBackoff:       o.MinRetryBackoff,
		MaxRetryBackoff:       o.MaxRetryBackoff,
		DialTimeout:           o.DialTimeout,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		PoolSize:              2,
		PoolTimeout:           o.PoolTimeout,
		TLSConfig:             o.TLSConfig,
	}
}

// clusterMasters returns every master of the cluster, as CLUSTER NODES on
// any node lists them (failed ones left out): unlike the slot map behind
// ForEachMaster, it has the masters that serve no slot yet, such as a node
// added and importing its first slot. Each comes with a func to call when
// done with its client.
func clusterMasters(ctx context.Context, cluster *redis.ClusterClient) ([]*redis.Client, []func(), error) {
	text, err := cluster.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, nil, err
	}
	var (
		clients []*redis.Client
		dones   []func()
	)
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		flags := "," + f[2] + ","
		if !strings.Contains(flags, ",master,") || strings.Contains(flags, ",fail,") ||
			strings.Contains(flags, ",noaddr,") || strings.Contains(flags, ",handshake,") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		if h, _, ok := strings.Cut(addr, ","); ok { // ip:port@cport,hostname
			addr = h
		}
		c, done := nodeClient(ctx, cluster, addr)
		clients = append(clients, c)
		dones = append(dones, done)
	}
	return clients, dones, nil
}

// errRing says why a Ring is refused.
var errRing = errors.New("a go-redis Ring shards keys by its own hash; use a *redis.Client per node, or a ClusterClient")

// checkClient returns ErrUnsupportedClient for a client the library
// cannot keep its promises on: a *redis.Ring, whose shards do not share
// the signal list of a lock with its key (BLPOP and the release's LPUSH
// may go to different shards unless every key is hash-tagged), nor send
// WAIT to the shard of the key.
func checkClient(client redis.UniversalClient) error {
	if _, ok := client.(interface{ Options() *redis.RingOptions }); ok { // a Ring, or a type around one
		return fmt.Errorf("%w (%w)", ErrUnsupportedClient, errRing)
	}
	return nil
}
