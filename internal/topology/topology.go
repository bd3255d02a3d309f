// Package topology sorts the error replies Redis gives while its topology
// changes, and says what a call does about them.
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
// raw. So every command of a lock goes through Do: such a reply
// is retried, with a short backoff, for as long as the call's context
// allows, but no longer than its patience. A slot left migrating by an
// operator (a resharding that died halfway) would otherwise hold a call
// for ever.
package topology

import (
	"cmp"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/registry"
)

// DefaultPatience bounds how long one call retries the replies above,
// when the caller gives no other bound.
const DefaultPatience = 10 * time.Second

// IsReply reports whether err is an error reply of Redis (not a transport
// error, nor a context's).
func IsReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// Backoff between retries of a topology reply.
const (
	minTopologyBackoff = 2 * time.Millisecond
	maxTopologyBackoff = 100 * time.Millisecond
)

// Backoff returns the pause before the next retry of a topology reply,
// after a pause of prev (0 before the first retry): doubling from 2 ms up
// to 100 ms.
func Backoff(prev time.Duration) time.Duration {
	return min(max(prev*2, minTopologyBackoff), maxTopologyBackoff)
}

// Kind classifies an error reply that says the command did not run
// because the topology is changing.
type Kind int

const (
	None     Kind = iota
	Moved         // MOVED slot addr
	Ask           // ASK slot addr
	TryAgain      // TRYAGAIN, CLUSTERDOWN, LOADING, UNBLOCKED
	ReadOnly      // READONLY: a master demoted by a failover
)

// Classify classifies err, and returns the address of a MOVED or ASK.
func Classify(err error) (Kind, string) {
	if err == nil || !IsReply(err) {
		return None, ""
	}
	msg := err.Error()
	for _, p := range [...]struct {
		prefix string
		kind   Kind
	}{
		{"MOVED ", Moved},
		{"ASK ", Ask},
		{"TRYAGAIN", TryAgain},
		{"CLUSTERDOWN", TryAgain},
		{"LOADING", TryAgain},
		{"UNBLOCKED", TryAgain},
		{"READONLY", ReadOnly},
	} {
		if rest, ok := strings.CutPrefix(msg, p.prefix); ok {
			addr := ""
			if p.kind == Moved || p.kind == Ask {
				if f := strings.Fields(rest); len(f) == 2 {
					addr = f[1]
				}
			}
			return p.kind, addr
		}
	}
	return None, ""
}

// Is reports whether err is one of the replies above.
func Is(err error) bool {
	k, _ := Classify(err)
	return k != None
}

// Retry paces the retries of one call (see Do). Its zero value is ready.
type Retry struct {
	start time.Time
	wait  time.Duration
}

// Again reports whether the call that got err should be sent again, after
// waiting; false when err is no topology reply, or ctx or the patience
// ran out. Before a retry it has a cluster client reload its slot map when
// the reply says the map is stale (MOVED, READONLY), or a node stopped
// answering (a failover: the client would otherwise dial the dead master
// until its next periodic reload).
func (r *Retry) Again(ctx context.Context, client redis.UniversalClient, err error) bool {
	kind, _ := Classify(err)
	switch kind {
	case None:
		return false
	case Moved, ReadOnly:
		RefreshSlots(ctx, client)
	}
	if r.start.IsZero() {
		r.start = time.Now()
	}
	r.wait = Backoff(r.wait)
	patience := DefaultPatience
	if d := registry.TuningOf(client).Patience; d > 0 { // a test's
		patience = d
	}
	if time.Since(r.start)+r.wait > patience {
		return false
	}
	return Sleep(ctx, r.wait)
}

// Do calls op until its error is no topology reply, within ctx and
// DefaultPatience (see Retry). It returns op's last error.
func Do(ctx context.Context, client redis.UniversalClient, op func() error) error {
	var r Retry
	for {
		err := op()
		if !r.Again(ctx, client, err) {
			return err
		}
	}
}

// Sleep waits d, or less when ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// RefreshSlots has a cluster client reload its slot map (in the
// background: go-redis does at most one reload at a time, and pauses 200
// ms after each). Other clients need nothing.
func RefreshSlots(ctx context.Context, client redis.UniversalClient) {
	if c, ok := client.(*redis.ClusterClient); ok {
		c.ReloadState(ctx)
	}
}

// NoteConnError is called after a command of a Lock failed without a
// reply: on a cluster the node may be gone (a failover), and the slot map
// is reloaded so that the next attempt goes to the new master.
func NoteConnError(ctx context.Context, client redis.UniversalClient, err error) {
	if err != nil && !IsReply(err) && !errors.Is(err, context.Canceled) {
		RefreshSlots(ctx, client)
	}
}

// Route is where the next attempt of a pipeline to one key's node goes:
// the key's master as the cluster client knows it, or the node of the last
// MOVED or ASK (with ASKING before each command of the key) until it too
// redirects. Only pipelines sent to one node (WithReplicaAck) need it; a
// ClusterClient routes everything else itself.
type Route struct {
	addr   string
	asking bool
}

// Node returns the client for the next attempt on key, whether each of
// its commands on the key must follow an ASKING, and a func to call when
// done with the client.
func (r *Route) Node(ctx context.Context, client redis.UniversalClient, key string) (redis.UniversalClient, bool, func(), error) {
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		return client, false, func() {}, nil
	}
	if r.addr != "" {
		n, done := NodeClient(ctx, cluster, r.addr)
		return n, r.asking, done, nil
	}
	n, err := cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, false, nil, err
	}
	return n, false, func() {}, nil
}

// Follow records where the reply err sends the next attempt.
func (r *Route) Follow(err error) {
	switch kind, addr := Classify(err); kind {
	case Moved:
		r.addr, r.asking = addr, false
	case Ask:
		r.addr, r.asking = addr, true
	default:
		r.addr, r.asking = "", false
	}
}

// NodeClient returns a client of the cluster node at addr and a func to
// call when done with it: the cluster client's own when its slot map (here
// reloaded) has the node; else, for a node that serves no slot yet (one
// added, and importing its first slot), a client of its own with the
// cluster's options, closed by the func.
func NodeClient(ctx context.Context, cluster *redis.ClusterClient, addr string) (*redis.Client, func()) {
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
	n := redis.NewClient(NodeOptions(cluster.Options(), addr))
	return n, func() { n.Close() }
}

// NodeOptions returns the options of a client of the node at addr of a
// cluster with options o, as go-redis makes them for its own nodes.
func NodeOptions(o *redis.ClusterOptions, addr string) *redis.Options {
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

// ClusterMasters returns every master of the cluster, as CLUSTER NODES on
// any node lists them (failed ones left out): unlike the slot map behind
// ForEachMaster, it has the masters that serve no slot yet, such as a node
// added and importing its first slot. Each comes with a func to call when
// done with its client.
func ClusterMasters(ctx context.Context, cluster *redis.ClusterClient) ([]*redis.Client, []func(), error) {
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
		c, done := NodeClient(ctx, cluster, addr)
		clients = append(clients, c)
		dones = append(dones, done)
	}
	return clients, dones, nil
}

// FailedPipeline gives the error of a pipeline that failed as a whole to
// those of cmds left without a result, which go-redis v9 leaves with
// neither value nor error: no connection (a dead node), or a connection
// whose set-up was refused with an error reply (maxclients reached, a
// password rotated, an OnConnect that failed). A command answered has a
// value or an error (a nil reply's is redis.Nil), so an error reply that
// is one command's own changes nothing. (An unanswered plain SET NX read
// as its OK: a waiter went on beside the holder.)
func FailedPipeline(err error, cmds ...*redis.Cmd) {
	if err == nil || errors.Is(err, redis.Nil) {
		return
	}
	for _, c := range cmds {
		if c.Err() == nil && c.Val() == nil {
			c.SetErr(err)
		}
	}
}

// FailoverAddr is the Addr of the options of go-redis's Sentinel failover
// client (NewFailoverClient): its dialer asks the Sentinels for the master.
// Connections made from those options stay on the master they reached:
// after a failover they go on to the old one, which may still call itself
// master for seconds, or hang, until something checks (see Pin).
const FailoverAddr = "FailoverClient"

// A Pin notes where the connections made from a failover client's options
// went, and tells whether the Sentinels name another master now (Moved).
// It asks nothing of the servers (INFO, ROLE), which an ACL may deny: the
// failover client's own dialer asks the Sentinels, as it does for every
// connection of the client.
type Pin struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	network string

	mu     sync.Mutex
	server string        // where the first connection went; "" before it
	split  bool          // a later one went elsewhere
	quiet  time.Time     // no check before: the Sentinels did not answer the last one
	pause  time.Duration // the last quiet spell
}

// pinPauseMax bounds the pause between checks while the Sentinels do not
// answer: go-redis logs each failed ask, and the checks run every second
// or so as long as holds or waits last.
const pinPauseMax = 30 * time.Second

// NewPin pins opt, a failover client's options (Addr is FailoverAddr):
// the connections made from opt afterwards are noted.
func NewPin(opt *redis.Options) *Pin {
	p := &Pin{dial: opt.Dialer, network: cmp.Or(opt.Network, "tcp")}
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := p.dial(ctx, network, addr)
		if err == nil {
			p.note(cn)
		}
		return cn, err
	}
	return p
}

func (p *Pin) note(cn net.Conn) {
	addr := remote(cn)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.server == "":
		p.server = addr
	case addr != p.server:
		p.split = true
	}
}

// Moved reports whether the pinned connections do not all reach the
// master the Sentinels name now: it makes a connection through them, and
// closes it at once. It reports false when it cannot tell: no connection
// was made yet, or none can be made now, after which it does not ask again
// for a while (1 s, doubling up to pinPauseMax).
func (p *Pin) Moved(ctx context.Context) bool {
	p.mu.Lock()
	server, split, quiet := p.server, p.split, time.Now().Before(p.quiet)
	p.mu.Unlock()
	if split {
		return true
	}
	if server == "" || quiet {
		return false
	}
	cn, err := p.dial(ctx, p.network, FailoverAddr)
	p.mu.Lock()
	if err != nil {
		p.pause = min(max(2*p.pause, time.Second), pinPauseMax)
		p.quiet = time.Now().Add(p.pause)
	} else {
		p.pause = 0
	}
	p.mu.Unlock()
	if err != nil {
		return false
	}
	addr := remote(cn)
	_ = cn.Close()
	return addr != "" && addr != server
}

// remote returns the address cn reaches, "" when it does not say.
func remote(cn net.Conn) string {
	if a := cn.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}
