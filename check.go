package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock/internal/topology"
	"github.com/go-redis-lock/redislock/internal/watch"
)

// Severity ranks a Finding of Check.
type Severity int

const (
	// SeverityInfo is worth knowing, with no risk to mutual exclusion.
	SeverityInfo Severity = iota
	// SeverityWarning is a risk in some failures, or something Check could not
	// inspect.
	SeverityWarning
	// SeverityProblem makes locks unsafe or unusable on this deployment.
	SeverityProblem
)

// String returns "info", "warning" or "problem".
func (s Severity) String() string {
	switch s {
	case SeverityInfo:
		return "info"
	case SeverityWarning:
		return "warning"
	}
	return "problem"
}

// A Finding is one thing Check reports about one Redis node.
type Finding struct {
	Severity Severity // how much it matters: SeverityProblem, SeverityWarning or SeverityInfo
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
		if f.Severity == SeverityProblem {
			return false
		}
	}
	return true
}

// Check inspects the deployment behind client (every master, and each
// replica it can reach) and reports what makes locks unsafe there (see
// docs/reference.md in the repository):
//
//   - SeverityProblem: a maxmemory-policy other than noeviction (a master's
//     or a replica's); a node that is a replica; fewer connected replicas
//     than WithReplicaAck in opts asks for; a Redis older than 6.0;
//   - SeverityWarning: replicas that WithReplicaAck does not cover; a
//     replica clock more than 500 ms from its master's; Redis refusing the
//     watch on held keys; what it could not read (an ACL without CONFIG);
//   - SeverityInfo: tracking-table-max-keys; no persistence; held keys
//     can be watched.
//
// It only reads, and closes the connections it opens. It returns an error
// only when a master cannot be reached, or one matching ErrInvalidArgument
// for an invalid client, or an option other than WithReplicaAck and
// WithTracking.
func Check(ctx context.Context, client redis.UniversalClient, opts ...Option) (Report, error) {
	if isNil(client) {
		return nil, ErrNilClient
	}
	if err := checkClient(client); err != nil {
		return nil, err
	}
	c := newConfig(opts)
	if err := c.only("Check", "WithReplicaAck", "WithTracking"); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := c.ack.fits(readTimeout(client)); err != nil {
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
	checkNode := func(ctx context.Context, node *redis.Client, addr string) error {
		fs, err := checkNode(ctx, node, addr, c.ack)
		add(fs...)
		if err == nil {
			add(checkTracking(node, addr, c)...)
		}
		return err
	}
	var err error
	if cluster, ok := client.(*redis.ClusterClient); ok {
		// Every master, also one that serves no slot yet but imports one.
		masters, dones, cerr := topology.ClusterMasters(ctx, cluster)
		err = cerr
		for i, m := range masters {
			if err == nil {
				err = checkNode(ctx, m, m.Options().Addr)
			}
			dones[i]()
		}
	} else if node, ok := client.(*redis.Client); ok {
		err = checkNode(ctx, node, nodeName(ctx, node))
	} else {
		fs, cerr := checkMaster(ctx, client, "redis", c.ack)
		add(fs...)
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("redislock: check: %w", err)
	}
	// Problems first, then warnings, then info; stable within each.
	sorted := make(Report, 0, len(report))
	for _, sev := range []Severity{SeverityProblem, SeverityWarning, SeverityInfo} {
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
		return finding(SeverityInfo, "key tracking off (WithTracking(false)): a lost lock is found at the next renewal or the local deadline")
	}
	n, ok := node.(*redis.Client)
	if !ok {
		return finding(SeverityWarning, "key tracking not available on a %T: a lost lock is found at the next renewal or the local deadline", node)
	}
	err := watch.Probe(*n.Options())
	if err != nil && !watch.Refuses(err) {
		return finding(SeverityWarning, "key tracking could not be set up just now (%v): holds are watched once it can, retried with backoff; until then a lost lock is found at the next renewal or the local deadline", err)
	}
	if err != nil {
		return finding(SeverityWarning, "key tracking refused (%v): a lost lock is found at the next renewal or the local deadline, not at once; allow HELLO, CLIENT ID, CLIENT TRACKING, SUBSCRIBE and the channel __redis__:invalidate", err)
	}
	return finding(SeverityInfo, "key tracking works: a lost lock is noticed as soon as the server reports its key changed")
}

// nodeName is how Check names the node of a *redis.Client: its address,
// or for a Sentinel failover client (whose Addr reads "FailoverClient") the
// address the master reports for this connection.
func nodeName(ctx context.Context, node *redis.Client) string {
	addr := node.Options().Addr
	if addr != "FailoverClient" {
		return addr
	}
	if info, err := node.Do(ctx, "CLIENT", "INFO").Text(); err == nil {
		for _, f := range strings.Fields(info) {
			if v, ok := strings.CutPrefix(f, "laddr="); ok {
				return v
			}
		}
	}
	return "master (Sentinel)"
}

// checkNode inspects one master and the replicas it reports.
func checkNode(ctx context.Context, node *redis.Client, addr string, ack replicaAck) ([]Finding, error) {
	fs, err := checkMaster(ctx, node, addr, ack)
	if err != nil {
		return fs, err
	}
	return append(fs, checkReplicas(ctx, node, addr)...), nil
}

// checkMaster inspects one node. Only an unreachable node is an error.
func checkMaster(ctx context.Context, node redis.UniversalClient, addr string, ack replicaAck) ([]Finding, error) {
	if err := node.Ping(ctx).Err(); err != nil {
		return nil, err
	}
	var fs []Finding
	add := func(sev Severity, format string, args ...any) {
		fs = append(fs, Finding{Severity: sev, Node: addr, Message: fmt.Sprintf(format, args...)})
	}
	checkConfig(ctx, node, add)
	checkReplication(ctx, node, ack, add)
	return fs, nil
}

// addFinding adds a finding of the node being checked.
type addFinding func(sev Severity, format string, args ...any)

// checkConfig inspects a node's eviction policy, tracking table and
// version.
func checkConfig(ctx context.Context, node redis.UniversalClient, add addFinding) {
	if policy, err := configGet(ctx, node, "maxmemory-policy"); err != nil {
		add(SeverityWarning, "could not read maxmemory-policy (%v): make sure it is noeviction", err)
	} else if policy != "noeviction" {
		add(SeverityProblem, "maxmemory-policy is %s: Redis may evict lock keys and let a second owner in; set noeviction", policy)
	}
	if n, err := configGet(ctx, node, "tracking-table-max-keys"); err == nil && n != "" && n != "0" {
		add(SeverityInfo, "tracking-table-max-keys is %s: with more locks held at once (by every client of the server that tracks keys), the server evicts keys from its tracking table, and the key watch reads each again about once a second, seeing a loss up to a second late; 0 is no limit", n)
	}
	if server, err := node.Info(ctx, "server").Result(); err != nil {
		add(SeverityWarning, "could not read INFO server (%v): make sure Redis is %s or later", err, minRedisVersion)
	} else if v := infoFields(server)["redis_version"]; !versionAtLeast(v, minRedisVersion) {
		add(SeverityProblem, "Redis %s is too old: waiting acquires need fractional BLPOP timeouts, and List and ResetAll need SCAN TYPE (both Redis %s)", v, minRedisVersion)
	}
}

// checkReplication inspects a node's role, replicas (against ack) and
// persistence.
func checkReplication(ctx context.Context, node redis.UniversalClient, ack replicaAck, add addFinding) {
	// One section an INFO: Redis before 7.0 takes only one.
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		add(SeverityWarning, "could not read INFO replication (%v): replicas and failover not checked", err)
		return
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
		add(SeverityProblem, "this node is a replica: lock writes fail on it; connect to the primary")
	case ack.on() && replicas < ack.n:
		add(SeverityProblem, "WithReplicaAck(%d) but %d replicas are connected: every acquire will fail", ack.n, replicas)
	case ack.on() && replicas > ack.n:
		add(SeverityWarning, "WithReplicaAck(%d) with %d replicas: a failover may promote one of the %d that were not waited for and missed a lock; ask for all of them", ack.n, replicas, replicas-ack.n)
	case !ack.on() && replicas > 0:
		add(SeverityWarning, "%d replicas and no WithReplicaAck: a failover may promote a replica that never got a lock", replicas)
	}
	if fields["aof_enabled"] == "0" && fields["rdb_last_save_time"] != "" {
		if save, err := configGet(ctx, node, "save"); err == nil && save == "" {
			add(SeverityInfo, "no persistence: a restart frees every lock (fencing tokens still grow)")
		}
	}
}

// minRedisVersion is the oldest Redis the library works with: waiting
// sends BLPOP with fractional timeouts, and List and ResetAll SCAN with
// TYPE, both from Redis 6.0. (Redis before 7.0.8 read a BLPOP timeout
// below 1 ms as "block forever", redis#11687; the library never sends
// one.)
const minRedisVersion = "6.0.0"

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
