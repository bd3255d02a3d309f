package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// waitFor polls cond every 10 ms until it is true, failing t after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// infoField returns one field of INFO section from the server at addr, ""
// when it cannot be read.
func infoField(addr, section, field string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// Port returns the server's port.
func (s *Server) Port() int {
	_, p, _ := strings.Cut(s.Addr, ":")
	n, _ := strconv.Atoi(p)
	return n
}

// Pause signals the server with SIGSTOP (it stops answering, its sockets
// stay open) and Cont resumes it.
func (s *Server) Pause() { s.cmd.Process.Signal(syscall.SIGSTOP) }

// Cont resumes a server paused with Pause.
func (s *Server) Cont() { s.cmd.Process.Signal(syscall.SIGCONT) }

// StartReplica starts a replica of primary and waits until its link is up
// and the primary counts it for WAIT: a write is acknowledged by it.
func StartReplica(t testing.TB, primary *Server) *Server {
	t.Helper()
	return startReplica(t, primary, Start)
}

// startReplica is StartReplica with start in place of Start.
func startReplica(t testing.TB, primary *Server, start func(testing.TB, ...string) *Server) *Server {
	t.Helper()
	// The primary would wait 5 s for more replicas before a diskless sync.
	pc := redis.NewClient(&redis.Options{Addr: primary.Addr})
	err := pc.ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err()
	pc.Close()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	r := start(t, fmt.Sprintf("replicaof 127.0.0.1 %d", primary.Port()))
	waitFor(t, 10*time.Second, "replica link up", func() bool {
		return infoField(r.Addr, "replication", "master_link_status") == "up"
	})
	// The replica's side of the link comes up before the primary has it
	// online and acknowledging; WAIT, which WithReplicaAck relies on, only
	// counts it then (on a loaded machine, a while later).
	pc = redis.NewClient(&redis.Options{Addr: primary.Addr, MaxRetries: -1})
	defer pc.Close()
	waitFor(t, 10*time.Second, "replica acknowledging writes", func() bool {
		ctx := context.Background()
		pipe := pc.Pipeline()
		pipe.Set(ctx, "redistest:replica-ready", "1", 0)
		pipe.Del(ctx, "redistest:replica-ready")
		wait := pipe.Do(ctx, "WAIT", 1, 100)
		pipe.Exec(ctx)
		n, err := wait.Int()
		return err == nil && n >= 1
	})
	return r
}

// Sentinels are redis-sentinel processes watching one primary under the
// name MasterName.
type Sentinels struct {
	Servers []*Server
}

// MasterName is the name the sentinels watch the primary under.
const MasterName = "redistest"

// Addrs returns the sentinels' addresses.
func (ss *Sentinels) Addrs() []string {
	var addrs []string
	for _, s := range ss.Servers {
		addrs = append(addrs, s.Addr)
	}
	return addrs
}

// MasterAddr asks the first answering sentinel for the current primary.
func (ss *Sentinels) MasterAddr() string {
	for _, s := range ss.Servers {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addr, err := c.GetMasterAddrByName(ctx, MasterName).Result()
		cancel()
		c.Close()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1]
		}
	}
	return ""
}

// StartSentinels starts n sentinels (quorum n/2+1) watching primary, with
// a fast failover: the primary is down after 500 ms without answers.
func StartSentinels(t testing.TB, primary *Server, n int) *Sentinels {
	t.Helper()
	ss := &Sentinels{}
	for i := 0; i < n; i++ {
		s := launch(t, func(port int, dir string) ([]string, error) {
			conf := filepath.Join(dir, "sentinel.conf")
			text := fmt.Sprintf(`bind 127.0.0.1
port %d
dir %s
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %s 500
sentinel failover-timeout %s 5000
sentinel parallel-syncs %s 1
`, port, dir, MasterName, primary.Port(), n/2+1, MasterName, MasterName, MasterName)
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				return nil, err
			}
			return []string{conf, "--sentinel"}, nil
		})
		ss.Servers = append(ss.Servers, s)
	}
	waitFor(t, 15*time.Second, "sentinels see the primary and each other", func() bool {
		for _, s := range ss.Servers {
			if v := infoField(s.Addr, "sentinel", "master0"); !strings.Contains(v, "status=ok") ||
				!strings.Contains(v, fmt.Sprintf("sentinels=%d", n)) {
				return false
			}
		}
		return true
	})
	return ss
}

// Cluster is a Redis Cluster: masters, and replicas when started with
// StartClusterWithReplicas. KillMaster and ManualFailover keep Masters and
// Replicas up to date with the roles the nodes have.
type Cluster struct {
	Masters  []*Server
	Replicas []*Server // nil for StartCluster

	mu    sync.Mutex
	nodes []*Server          // every node ever started, dead ones included
	ids   map[*Server]string // node IDs, which survive Restart (nodes.conf)
}

// Addrs returns the masters' addresses.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, s := range c.Masters {
		addrs = append(addrs, s.Addr)
	}
	return addrs
}

// Client returns a cluster client of c, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// StartCluster starts n masters with cluster mode on, joins them with
// redis-cli --cluster create, and waits until every node says the cluster
// is ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Binary(t) // skips or fails with the install hint when redis-server is missing too
		msg := "redis-cli not found on PATH: install redis-tools to run the cluster tests"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	c := &Cluster{}
	for i := 0; i < n; i++ {
		c.Masters = append(c.Masters, Start(t, "cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 2000"))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	waitFor(t, 20*time.Second, "cluster state ok on every node", func() bool {
		for _, s := range c.Masters {
			if infoOf(s.Addr, "CLUSTER", "INFO", "cluster_state") != "ok" {
				return false
			}
		}
		return true
	})
	return c
}

// infoOf runs a command whose reply is INFO-like text and returns field.
func infoOf(addr, cmd, sub, field string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	text, err := c.Do(ctx, cmd, sub).Text()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
