package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Severity ranks a Finding of Check.
type Severity int

const (
	// Info is worth knowing, with no risk to mutual exclusion.
	Info Severity = iota
	// Warning is a risk in some failures, or something Check could not
	// inspect.
	Warning
	// Problem makes locks unsafe or unusable on this deployment.
	Problem
)

// String returns "info", "warning" or "problem".
func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	}
	return "problem"
}

// A Finding is one thing Check reports about one Redis node.
type Finding struct {
	Severity Severity // how much it matters: Problem, Warning or Info
	Node     string   // the node's address
	Message  string   // what was found and what to do about it
}

// String formats the finding as "severity: node: message".
func (f Finding) String() string { return fmt.Sprintf("%s: %s: %s", f.Severity, f.Node, f.Message) }

// Report is what Check found, Problems first.
type Report []Finding

// OK reports whether the report has no Problem.
func (r Report) OK() bool {
	for _, f := range r {
		if f.Severity == Problem {
			return false
		}
	}
	return true
}

// Check inspects the deployment behind client (every master of a cluster)
// and reports what makes locks unsafe there:
//
//   - a maxmemory-policy other than noeviction (Problem): Redis may evict a
//     lock key and another owner then takes the lock;
//   - a node that is a replica (Problem): lock writes would fail;
//   - replicas with no WithReplicaAck among opts (Warning): a failover may
//     promote a replica that never got a lock; fewer connected replicas
//     than WithReplicaAck asks for (Problem): every acquire would fail;
//   - a Redis older than MinRedisVersion (Problem);
//   - no persistence (Info): a restart frees every lock;
//   - whether held keys can be watched (see WithTracking): Info when they
//     can, a Warning when Redis refuses tracking, a loss then being found
//     only at the next renewal;
//   - what it could not read, for instance under an ACL without CONFIG
//     (Warning).
//
// It only reads (CONFIG GET, INFO), and opens and closes the two
// connections of a tracker. It returns an error only when a node
// cannot be reached or opts are invalid.
func Check(ctx context.Context, client redis.UniversalClient, opts ...Option) (Report, error) {
	if client == nil {
		return nil, ErrNilClient
	}
	c := newConfig(opts)
	if err := c.validate(); err != nil {
		return nil, err
	}
	var (
		mu     sync.Mutex
		report Report
	)
	add := func(fs ...Finding) {
		mu.Lock()
		report = append(report, fs...)
		mu.Unlock()
	}
	checkNode := func(ctx context.Context, node redis.UniversalClient, addr string) error {
		fs, err := checkNode(ctx, node, addr, c.ack)
		add(fs...)
		if err == nil {
			add(checkTracking(node, addr, c)...)
		}
		return err
	}
	var err error
	if cluster, ok := client.(*redis.ClusterClient); ok {
		err = cluster.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
			return checkNode(ctx, master, master.Options().Addr)
		})
	} else {
		addr := "redis"
		if o, ok := client.(interface{ Options() *redis.Options }); ok {
			addr = o.Options().Addr
		}
		err = checkNode(ctx, client, addr)
	}
	if err != nil {
		return nil, fmt.Errorf("redislock: check: %w", err)
	}
	// Problems first, then warnings, then info; stable within each.
	sorted := make(Report, 0, len(report))
	for _, sev := range []Severity{Problem, Warning, Info} {
		for _, f := range report {
			if f.Severity == sev {
				sorted = append(sorted, f)
			}
		}
	}
	return sorted, nil
}

// checkTracking reports whether holds on node can be watched (see
// WithTracking): it sets up a tracker's connections, as a hold would, and
// closes them again.
func checkTracking(node redis.UniversalClient, addr string, c config) []Finding {
	finding := func(sev Severity, format string, args ...any) []Finding {
		return []Finding{{Severity: sev, Node: addr, Message: fmt.Sprintf(format, args...)}}
	}
	if c.noTracking {
		return finding(Info, "key tracking off (WithTracking(false)): a lost lock is found at the next renewal or the local deadline")
	}
	n, ok := node.(*redis.Client)
	if !ok {
		return finding(Warning, "key tracking not available on a %T: a lost lock is found at the next renewal or the local deadline", node)
	}
	conns, err := connectTracking(*n.Options())
	if err != nil {
		return finding(Warning, "key tracking refused (%v): a lost lock is found at the next renewal or the local deadline, not at once; allow HELLO, CLIENT ID, CLIENT TRACKING, SUBSCRIBE and the channel __redis__:invalidate", err)
	}
	conns.close()
	return finding(Info, "key tracking works: a lost lock is noticed at once")
}

// checkNode inspects one node. Only an unreachable node is an error.
func checkNode(ctx context.Context, node redis.UniversalClient, addr string, ack replicaAck) ([]Finding, error) {
	if err := node.Ping(ctx).Err(); err != nil {
		return nil, err
	}
	var fs []Finding
	add := func(sev Severity, format string, args ...any) {
		fs = append(fs, Finding{Severity: sev, Node: addr, Message: fmt.Sprintf(format, args...)})
	}

	if policy, err := configGet(ctx, node, "maxmemory-policy"); err != nil {
		add(Warning, "could not read maxmemory-policy (%v): make sure it is noeviction", err)
	} else if policy != "noeviction" {
		add(Problem, "maxmemory-policy is %s: Redis may evict lock keys and let a second owner in; set noeviction", policy)
	}

	if server, err := node.Info(ctx, "server").Result(); err != nil {
		add(Warning, "could not read INFO server (%v): make sure Redis is %s or later", err, MinRedisVersion)
	} else if v := infoFields(server)["redis_version"]; !versionAtLeast(v, MinRedisVersion) {
		add(Problem, "Redis %s is too old: waiting acquires need fractional BLPOP timeouts, and List and ResetAll need SCAN TYPE (both Redis %s)", v, MinRedisVersion)
	}

	// One section an INFO: Redis before 7.0 takes only one.
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		add(Warning, "could not read INFO replication (%v): replicas and failover not checked", err)
		return fs, nil
	}
	fields := infoFields(info)
	if persistence, err := node.Info(ctx, "persistence").Result(); err == nil {
		for k, v := range infoFields(persistence) {
			fields[k] = v
		}
	}
	replicas, _ := strconv.Atoi(fields["connected_slaves"])
	switch {
	case fields["role"] == "slave":
		add(Problem, "this node is a replica: lock writes fail on it; connect to the primary")
	case ack.on() && replicas < ack.n:
		add(Problem, "WithReplicaAck(%d) but %d replicas are connected: every acquire will fail", ack.n, replicas)
	case !ack.on() && replicas > 0:
		add(Warning, "%d replicas and no WithReplicaAck: a failover may promote a replica that never got a lock", replicas)
	}
	if fields["aof_enabled"] == "0" && fields["rdb_last_save_time"] != "" {
		if save, err := configGet(ctx, node, "save"); err == nil && save == "" {
			add(Info, "no persistence: a restart frees every lock (fencing tokens still grow)")
		}
	}
	return fs, nil
}

// MinRedisVersion is the oldest Redis the library works with: waiting
// sends BLPOP with fractional timeouts, and List and ResetAll SCAN with
// TYPE, both from Redis 6.0. (Redis before 7.0.8 read a BLPOP timeout
// below 1 ms as "block forever", redis#11687; the library never sends
// one.)
const MinRedisVersion = "6.0.0"

// versionAtLeast reports whether the dotted version v is at least min. An
// unparsable v counts as new enough: forks and proxies report their own.
func versionAtLeast(v, min string) bool {
	parse := func(s string) (parts [3]int, ok bool) {
		for i, f := range strings.SplitN(s, ".", 3) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return parts, false
			}
			parts[i] = n
		}
		return parts, true
	}
	have, ok := parse(v)
	want, _ := parse(min)
	if !ok {
		return true
	}
	for i := range have {
		if have[i] != want[i] {
			return have[i] > want[i]
		}
	}
	return true
}

// configGet returns one CONFIG GET value.
func configGet(ctx context.Context, node redis.UniversalClient, name string) (string, error) {
	vals, err := node.ConfigGet(ctx, name).Result()
	if err != nil {
		return "", err
	}
	v, ok := vals[name]
	if !ok {
		return "", fmt.Errorf("%s not in CONFIG GET reply", name)
	}
	return v, nil
}

// infoFields parses INFO text into its fields.
func infoFields(info string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}
