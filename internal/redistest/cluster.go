package redistest

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file holds the helpers for a cluster that changes under the tests
// (replicas, slot migration, failover) and for servers whose clock is
// skewed.

// clusterDirectives are the directives of every StartClusterWithReplicas
// node: a fast failure detection (a node is failing after 1 s without
// answers), no delay before a diskless full sync, and replicas that take
// over however long their master has been silent (validity factor 0), so
// a test that paused a master for a while can still fail it over.
var clusterDirectives = []string{
	"cluster-enabled yes",
	"cluster-config-file nodes.conf",
	"cluster-node-timeout 1000",
	"cluster-replica-validity-factor 0",
	"repl-diskless-sync-delay 0",
}

// StartClusterWithReplicas starts masters*(1+replicasPerMaster) nodes in
// cluster mode (cluster-node-timeout 1000, repl-diskless-sync-delay 0),
// joins them with redis-cli --cluster create --cluster-replicas, and waits
// until every node says the cluster is ok and knows every other node, every
// replica's link to its master is up, and every master counts its replicas
// for WAIT. redis-cli decides which node replicates which; Masters and
// Replicas hold the roles the nodes report (in start order) and ReplicasOf
// tells the replicas of a master. masters must be at least 3.
func StartClusterWithReplicas(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	if masters < 3 || replicasPerMaster < 0 {
		t.Fatalf("redistest: a cluster needs 3 masters or more and no negative replica count, not %d and %d", masters, replicasPerMaster)
	}
	cli := redisCLI(t)
	n := masters * (1 + replicasPerMaster)
	c := &Cluster{ids: map[*Server]string{}}
	for i := 0; i < n; i++ {
		c.nodes = append(c.nodes, launch(t, clusterNodeArgs(clusterDirectives)))
	}
	args := []string{"--cluster", "create"}
	for _, s := range c.nodes {
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	cancel()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	poll(t, 20*time.Second, "cluster state ok on every node", func() error {
		for _, s := range c.nodes {
			if st := infoOf(s.Addr, "CLUSTER", "INFO", "cluster_state"); st != "ok" {
				return fmt.Errorf("%s: cluster_state %q", s.Addr, st)
			}
			if k := infoOf(s.Addr, "CLUSTER", "INFO", "cluster_known_nodes"); k != strconv.Itoa(n) {
				return fmt.Errorf("%s: knows %s nodes of %d", s.Addr, k, n)
			}
		}
		return nil
	})
	slotsOf := map[*Server][][2]int{}
	for _, s := range c.nodes {
		me, err := myselfOf(s.Addr)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		c.ids[s] = me.id
		if me.has("master") {
			c.Masters = append(c.Masters, s)
			slotsOf[s] = me.slots
		} else {
			c.Replicas = append(c.Replicas, s)
		}
	}
	if len(c.Masters) != masters {
		t.Fatalf("redistest: redis-cli made %d masters, not %d", len(c.Masters), masters)
	}
	poll(t, 20*time.Second, "replica links up", func() error {
		for _, r := range c.Replicas {
			if st := infoField(r.Addr, "replication", "master_link_status"); st != "up" {
				return fmt.Errorf("%s: master_link_status %q", r.Addr, st)
			}
		}
		return nil
	})
	if replicasPerMaster > 0 {
		for _, m := range c.Masters {
			if len(slotsOf[m]) == 0 {
				t.Fatalf("redistest: master %s serves no slot", m.Addr)
			}
			key := KeyForSlot(slotsOf[m][0][0]) + ":replica-ready"
			poll(t, 20*time.Second, "replicas of "+m.Addr+" acknowledging writes", func() error {
				return acked(m.Addr, key, replicasPerMaster)
			})
		}
	}
	return c
}

// acked writes and deletes key on the master at addr and returns an error
// unless WAIT says n replicas or more acknowledged it within 100 ms.
func acked(addr, key string, n int) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pipe := c.Pipeline() // one connection: WAIT counts this client's writes
	pipe.Set(ctx, key, "1", 0)
	pipe.Del(ctx, key)
	wait := pipe.Do(ctx, "WAIT", n, 100)
	pipe.Exec(ctx)
	got, err := wait.Int()
	if err != nil {
		return err
	}
	if got < n {
		return fmt.Errorf("WAIT %d: %d replicas acknowledged", n, got)
	}
	return nil
}

// clusterNodeArgs returns Start's arguments with extra, plus a cluster bus
// port of its own (the default, port+10000, may be taken or out of range).
func clusterNodeArgs(extra []string) func(port int, dir string) ([]string, error) {
	base := startArgs(extra)
	return func(port int, dir string) ([]string, error) {
		var bus int
		var err error
		for bus == 0 || bus == port {
			if bus, err = freePort(); err != nil {
				return nil, err
			}
		}
		args, err := base(port, dir)
		return append(args, "--cluster-port", strconv.Itoa(bus)), err
	}
}

// redisCLI returns the path of redis-cli, or skips t (fails it when
// CI=true) when there is none.
func redisCLI(t testing.TB) string {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err == nil {
		return cli
	}
	Binary(t) // skips or fails with the install hint when redis-server is missing too
	msg := "redis-cli not found on PATH: install redis-tools to run the cluster tests"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// ReplicasOf returns the running nodes of c that say they replicate
// master (each replica's own CLUSTER NODES line), in start order; none when
// master's node ID is unknown (it never answered).
func (c *Cluster) ReplicasOf(master *Server) []*Server {
	id, err := c.idOf(master)
	if err != nil {
		return nil
	}
	var out []*Server
	for _, s := range c.all() {
		if s == master || !s.running() {
			continue
		}
		if me, err := myselfOf(s.Addr); err == nil && me.has("slave") && me.masterID == id {
			out = append(out, s)
		}
	}
	return out
}

// MasterOf returns the running master that serves slot now: among the
// nodes that claim it in their own CLUSTER NODES line, the one with the
// highest config epoch. During a migration that is the source until
// Finish.
func (c *Cluster) MasterOf(t testing.TB, slot int) *Server {
	t.Helper()
	s, err := c.masterOf(slot)
	if err != nil {
		t.Fatalf("redistest: master of slot %d: %v", slot, err)
	}
	return s
}

func (c *Cluster) masterOf(slot int) (*Server, error) {
	if slot < 0 || slot >= slots {
		return nil, fmt.Errorf("no such slot")
	}
	var best *Server
	var epoch int64 = -1
	for _, s := range c.all() {
		if !s.running() {
			continue
		}
		me, err := myselfOf(s.Addr)
		if err == nil && me.has("master") && me.owns(slot) && me.epoch > epoch {
			best, epoch = s, me.epoch
		}
	}
	if best == nil {
		return nil, errors.New("no running node serves it")
	}
	return best, nil
}

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// Slot returns the hash slot of key, as CLUSTER KEYSLOT does: CRC16 of
// the key, or of its hash tag (what is between the first { and the next }
// when that is not empty), modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % slots)
}

// crc16 is the CRC16-CCITT (XModem) checksum Redis Cluster hashes keys
// with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// KeyForSlot returns a key in slot made of a hash tag alone,
// "{redistest:N}", so a key that adds to it anything without a { of its
// own ("lock:{redistest:N}:x") is in slot too.
func KeyForSlot(slot int) string {
	if slot < 0 || slot >= slots {
		panic(fmt.Sprintf("redistest: no slot %d", slot))
	}
	for i := 0; ; i++ {
		tag := "redistest:" + strconv.Itoa(i)
		if int(crc16(tag)%slots) == slot {
			return "{" + tag + "}"
		}
	}
}

// Migration is a slot being moved from one master to another in steps:
// BeginMigration, MoveKeys (any number of times), Finish. In between the
// source answers ASK for the keys it no longer holds and the target
// answers those after ASKING.
type Migration struct {
	Slot     int
	From, To *Server

	c            *Cluster
	fromID, toID string
}

// BeginMigration marks slot as importing on to (CLUSTER SETSLOT slot
// IMPORTING from-id) and then as migrating on its current master, From
// (CLUSTER SETSLOT slot MIGRATING to-id). No key is moved yet.
func (c *Cluster) BeginMigration(t testing.TB, slot int, to *Server) *Migration {
	t.Helper()
	from := c.MasterOf(t, slot)
	if from == to {
		t.Fatalf("redistest: slot %d is on %s already", slot, to.Addr)
	}
	m := &Migration{Slot: slot, From: from, To: to, c: c}
	var err error
	if m.fromID, err = c.idOf(from); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if m.toID, err = c.idOf(to); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if _, err := call(to.Addr, time.Second, "CLUSTER", "SETSLOT", slot, "IMPORTING", m.fromID); err != nil {
		t.Fatalf("redistest: CLUSTER SETSLOT %d IMPORTING on %s: %v", slot, to.Addr, err)
	}
	if _, err := call(from.Addr, time.Second, "CLUSTER", "SETSLOT", slot, "MIGRATING", m.toID); err != nil {
		t.Fatalf("redistest: CLUSTER SETSLOT %d MIGRATING on %s: %v", slot, from.Addr, err)
	}
	return m
}

// migrateBatch is how many keys MoveKeys moves with one MIGRATE.
const migrateBatch = 100

// MoveKeys moves every key of the slot that is on the source now to the
// target (CLUSTER GETKEYSINSLOT, then MIGRATE ... KEYS, in batches of
// 100). It can be called again for the keys written on the source since.
// A key of the same name on the target fails t (MIGRATE answers BUSYKEY).
func (m *Migration) MoveKeys(t testing.TB) {
	t.Helper()
	host, port, _ := net.SplitHostPort(m.To.Addr)
	for round := 0; ; round++ {
		if round > 10000 {
			t.Fatalf("redistest: slot %d on %s keeps having keys to move", m.Slot, m.From.Addr)
		}
		keys, err := callCmd(m.From.Addr, time.Second, "CLUSTER", "GETKEYSINSLOT", m.Slot, migrateBatch).StringSlice()
		if err != nil {
			t.Fatalf("redistest: CLUSTER GETKEYSINSLOT %d on %s: %v", m.Slot, m.From.Addr, err)
		}
		if len(keys) == 0 {
			return
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if _, err := call(m.From.Addr, 10*time.Second, args...); err != nil {
			t.Fatalf("redistest: MIGRATE of slot %d from %s to %s: %v", m.Slot, m.From.Addr, m.To.Addr, err)
		}
	}
}

// Finish moves the keys left (MoveKeys), assigns the slot to the target
// (CLUSTER SETSLOT slot NODE to-id on the target, the source, and every
// other running master) and waits until every running master, and every
// answering replica, sees the target serving it.
func (m *Migration) Finish(t testing.TB) {
	t.Helper()
	m.MoveKeys(t)
	targets := []*Server{m.To, m.From}
	for _, s := range m.c.Masters {
		if s != m.To && s != m.From && s.running() {
			targets = append(targets, s)
		}
	}
	for _, s := range targets {
		if _, err := call(s.Addr, time.Second, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.toID); err != nil {
			t.Fatalf("redistest: CLUSTER SETSLOT %d NODE on %s: %v", m.Slot, s.Addr, err)
		}
	}
	poll(t, 10*time.Second, fmt.Sprintf("every node sees slot %d on %s", m.Slot, m.To.Addr), func() error {
		return m.c.agree(m.To, [][2]int{{m.Slot, m.Slot}}, false)
	})
}

// MigrateSlot moves slot and its keys to the master to: BeginMigration and
// Finish.
func (c *Cluster) MigrateSlot(t testing.TB, slot int, to *Server) {
	t.Helper()
	c.BeginMigration(t, slot, to).Finish(t)
}

// KillMaster kills master (SIGKILL) and waits, up to 20 s, until one of its
// replicas is a master serving its slots, every running node sees it so
// and says the cluster is ok; it returns that replica. In Masters the
// promoted replica takes the killed master's place, and it leaves
// Replicas; the killed master is in neither (Restart brings it back, with
// its node ID, as a replica of the promoted one, but not into the lists).
// Other replicas of the killed master follow the promoted one and stay in
// Replicas.
func (c *Cluster) KillMaster(t testing.TB, master *Server) (promoted *Server) {
	t.Helper()
	me, err := myselfOf(master.Addr)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if !me.has("master") || len(me.slots) == 0 {
		t.Fatalf("redistest: %s is not a master serving slots", master.Addr)
	}
	replicas := c.ReplicasOf(master)
	if len(replicas) == 0 {
		t.Fatalf("redistest: master %s has no replica to take over", master.Addr)
	}
	master.Kill()
	poll(t, 20*time.Second, "a replica of "+master.Addr+" taking over", func() error {
		promoted = nil
		for _, r := range replicas {
			if rm, err := myselfOf(r.Addr); err == nil && rm.has("master") && rm.ownsAll(me.slots) {
				promoted = r
				break
			}
		}
		if promoted == nil {
			return errors.New("no replica serves its slots yet")
		}
		return c.agree(promoted, me.slots, true)
	})
	c.Masters = replaced(c.Masters, master, promoted)
	c.Replicas = slices.DeleteFunc(slices.Clone(c.Replicas), func(s *Server) bool { return s == promoted })
	return promoted
}

// ManualFailover makes replica the master of its master's slots with
// CLUSTER FAILOVER (the master stays up and becomes its replica) and waits,
// up to 20 s, until the roles have swapped, every running node sees replica
// serving the slots and says the cluster is ok. In Masters the replica
// takes the old master's place, and in Replicas the old master takes the
// replica's.
func (c *Cluster) ManualFailover(t testing.TB, replica *Server) {
	t.Helper()
	me, err := myselfOf(replica.Addr)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if !me.has("slave") {
		t.Fatalf("redistest: %s is not a replica", replica.Addr)
	}
	old := c.byID(me.masterID)
	if old == nil || !old.running() {
		t.Fatalf("redistest: the master of %s is not a running node of the cluster", replica.Addr)
	}
	om, err := myselfOf(old.Addr)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if _, err := call(replica.Addr, time.Second, "CLUSTER", "FAILOVER"); err != nil {
		t.Fatalf("redistest: CLUSTER FAILOVER on %s: %v", replica.Addr, err)
	}
	// A manual failover that does not complete within the server's own
	// limit (5 s: the master must pause its clients and the replica catch
	// up) is aborted silently, and the replica stays one: on a loaded
	// machine that happens (CI waited 20 s for nothing). It is asked again
	// then.
	sent := time.Now()
	poll(t, 30*time.Second, replica.Addr+" taking over from "+old.Addr, func() error {
		rm, err := myselfOf(replica.Addr)
		if err == nil && rm.has("slave") && time.Since(sent) > 6*time.Second {
			_, _ = call(replica.Addr, time.Second, "CLUSTER", "FAILOVER")
			sent = time.Now()
		}
		if err != nil || !rm.has("master") || !rm.ownsAll(om.slots) {
			return errors.New("the replica does not serve the slots yet")
		}
		if o, err := myselfOf(old.Addr); err != nil || !o.has("slave") || o.masterID != me.id {
			return errors.New("the old master is not its replica yet")
		}
		return c.agree(replica, om.slots, true)
	})
	c.Masters = replaced(c.Masters, old, replica)
	c.Replicas = replaced(c.Replicas, replica, old)
}

// replaced returns a copy of list with old replaced by s, or with s
// appended when old is not in it.
func replaced(list []*Server, old, s *Server) []*Server {
	out := slices.Clone(list)
	if i := slices.Index(out, old); i >= 0 {
		out[i] = s
		return out
	}
	return append(out, s)
}

// agree returns an error unless every running master of c, and every
// other running node that answers, sees owner serving the first and last
// slot of every range in ranges (and, with stateOK, says the cluster is
// ok).
func (c *Cluster) agree(owner *Server, ranges [][2]int, stateOK bool) error {
	ownerID, err := c.idOf(owner)
	if err != nil {
		return err
	}
	for _, s := range c.all() {
		if !s.running() {
			continue
		}
		required := s == owner || slices.Contains(c.Masters, s)
		view, err := clusterNodesOf(s.Addr)
		if err != nil {
			if required {
				return err
			}
			continue
		}
		if stateOK {
			if st := infoOf(s.Addr, "CLUSTER", "INFO", "cluster_state"); st != "ok" {
				return fmt.Errorf("%s: cluster_state %q", s.Addr, st)
			}
		}
		for _, r := range ranges {
			for _, slot := range r {
				if o, ok := ownerIn(view, slot); !ok || o.id != ownerID {
					return fmt.Errorf("%s sees slot %d on %q, not on %s", s.Addr, slot, o.addr, owner.Addr)
				}
			}
		}
	}
	return nil
}

// all returns every node of c: those started, then any other in Masters
// or Replicas.
func (c *Cluster) all() []*Server {
	c.mu.Lock()
	out := slices.Clone(c.nodes)
	c.mu.Unlock()
	for _, s := range append(slices.Clone(c.Masters), c.Replicas...) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// idOf returns the node ID of s, asking it (CLUSTER MYID) the first time.
func (c *Cluster) idOf(s *Server) (string, error) {
	c.mu.Lock()
	id, ok := c.ids[s]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := callCmd(s.Addr, time.Second, "CLUSTER", "MYID").Text()
	if err != nil {
		return "", fmt.Errorf("CLUSTER MYID on %s: %v", s.Addr, err)
	}
	c.mu.Lock()
	if c.ids == nil {
		c.ids = map[*Server]string{}
	}
	c.ids[s] = id
	c.mu.Unlock()
	return id, nil
}

// byID returns the node of c whose ID is id, nil when there is none.
func (c *Cluster) byID(id string) *Server {
	for _, s := range c.all() {
		if sid, err := c.idOf(s); err == nil && sid == id {
			return s
		}
	}
	return nil
}

// running reports whether the server's process has been started and has
// not exited.
func (s *Server) running() bool {
	if s.cmd == nil || s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr string // addr without the bus port
	flags    []string
	masterID string // "-" for a master
	epoch    int64
	slots    [][2]int // ranges served; migrating and importing marks left out
}

func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

func (n clusterNode) owns(slot int) bool {
	for _, r := range n.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

func (n clusterNode) ownsAll(ranges [][2]int) bool {
	for _, r := range ranges {
		for slot := r[0]; slot <= r[1]; slot++ {
			if !n.owns(slot) {
				return false
			}
		}
	}
	return true
}

// parseClusterNodes parses the reply of CLUSTER NODES.
func parseClusterNodes(text string) ([]clusterNode, error) {
	var out []clusterNode
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		n := clusterNode{id: f[0], flags: strings.Split(f[2], ","), masterID: f[3]}
		n.addr, _, _ = strings.Cut(f[1], "@")
		n.epoch, _ = strconv.ParseInt(f[6], 10, 64)
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err := strconv.Atoi(lo)
			b := a
			if err == nil && isRange {
				b, err = strconv.Atoi(hi)
			}
			if err != nil {
				return nil, fmt.Errorf("CLUSTER NODES slots %q", r)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	return out, nil
}

// clusterNodesOf returns the CLUSTER NODES of the node at addr.
func clusterNodesOf(addr string) ([]clusterNode, error) {
	text, err := callCmd(addr, time.Second, "CLUSTER", "NODES").Text()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %v", addr, err)
	}
	return parseClusterNodes(text)
}

// myselfOf returns the line of CLUSTER NODES where the node at addr
// describes itself.
func myselfOf(addr string) (clusterNode, error) {
	nodes, err := clusterNodesOf(addr)
	if err != nil {
		return clusterNode{}, err
	}
	for _, n := range nodes {
		if n.has("myself") {
			return n, nil
		}
	}
	return clusterNode{}, fmt.Errorf("CLUSTER NODES on %s: no myself line", addr)
}

// ownerIn returns the master that serves slot in view, the one with the
// highest config epoch if several claim it.
func ownerIn(view []clusterNode, slot int) (clusterNode, bool) {
	var best clusterNode
	found := false
	for _, n := range view {
		if n.has("master") && n.owns(slot) && (!found || n.epoch > best.epoch) {
			best, found = n, true
		}
	}
	return best, found
}

// callCmd runs one command on the server at addr over a connection of its
// own, within timeout.
func callCmd(addr string, timeout time.Duration, args ...any) *redis.Cmd {
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: timeout, WriteTimeout: timeout,
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Do(ctx, args...)
}

// call is callCmd returning the reply.
func call(addr string, timeout time.Duration, args ...any) (any, error) {
	return callCmd(addr, timeout, args...).Result()
}

// poll calls check every 50 ms until it returns nil, failing t with its
// last error after d.
func poll(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: not within %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartSkewed is Start with the server's clock offset from the real one by
// offset, rounded to whole seconds: redis-server runs under libfaketime
// (LD_PRELOAD, FAKETIME="+60" or "-60", the documented relative-offset
// format in seconds), so TIME, expiry times and the expiry clock are
// offset; the monotonic clock is left alone (FAKETIME_DONT_FAKE_MONOTONIC).
// Restart keeps the offset. Without libfaketime the test is skipped with a
// hint to install it (apt-get install faketime), and fails when CI=true.
//
// libfaketime deadlocks a redis-server that is dynamically linked with
// jemalloc (Debian's is): jemalloc calls clock_gettime while it
// initializes, libfaketime allocates while it initializes. So glibc's
// libc_malloc_debug.so.0 is preloaded first in that case, which makes the
// server allocate with glibc's malloc: INFO memory's allocator_* fields
// (jemalloc's) mean nothing on such a server, used_memory still does.
func StartSkewed(t testing.TB, offset time.Duration, extra ...string) *Server {
	t.Helper()
	return launchEnv(t, skewEnv(t, offset), startArgs(extra))
}

// StartSkewedReplica is StartReplica with the replica's clock offset from
// the real one as StartSkewed does it.
func StartSkewedReplica(t testing.TB, primary *Server, offset time.Duration) *Server {
	t.Helper()
	return startReplica(t, primary, func(t testing.TB, extra ...string) *Server {
		t.Helper()
		return StartSkewed(t, offset, extra...)
	})
}

// fakeTimeOffset returns offset as libfaketime's FAKETIME wants a relative
// offset: whole seconds (rounded) with their sign, "+60", "-5", "+0".
func fakeTimeOffset(offset time.Duration) string {
	return fmt.Sprintf("%+d", int64(offset.Round(time.Second)/time.Second))
}

// skewEnv returns the environment that runs redis-server offset from the
// real clock, or skips t (fails it when CI=true) without libfaketime.
func skewEnv(t testing.TB, offset time.Duration) []string {
	t.Helper()
	bin := Binary(t)
	missing := func(msg string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: these tests must run)")
		}
		t.Skip(msg)
	}
	lib := libraryFor(bin, "/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib64/faketime/libfaketime.so.1",
		"/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1")
	if lib == "" {
		missing("libfaketime not found: install it (apt-get install faketime) to run the clock-skew tests")
	}
	preload := lib
	if linksJemalloc(bin) {
		dbg := libraryFor(bin, "/lib/*/libc_malloc_debug.so.0", "/usr/lib/*/libc_malloc_debug.so.0",
			"/lib64/libc_malloc_debug.so.0", "/usr/lib64/libc_malloc_debug.so.0")
		if dbg == "" {
			missing("redis-server uses the shared jemalloc, which deadlocks under libfaketime, and glibc's libc_malloc_debug.so.0 (glibc 2.34 or later) is not there to avoid it")
		}
		preload = dbg + ":" + lib
	}
	return []string{
		"LD_PRELOAD=" + preload,
		"FAKETIME=" + fakeTimeOffset(offset),
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// libraryFor returns the first file matching one of patterns that is an
// ELF object for the machine bin is for, "" when there is none.
func libraryFor(bin string, patterns ...string) string {
	want := elfMachine(bin)
	for _, p := range patterns {
		matches, _ := filepath.Glob(p)
		for _, m := range matches {
			if got := elfMachine(m); got != 0 && (want == 0 || got == want) {
				return m
			}
		}
	}
	return ""
}

// elfMachine returns the machine of the ELF file at path, 0 when it cannot
// be read.
func elfMachine(path string) elf.Machine {
	f, err := elf.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	return f.Machine
}

// linksJemalloc reports whether the executable bin loads a shared jemalloc.
func linksJemalloc(bin string) bool {
	f, err := elf.Open(bin)
	if err != nil {
		return false
	}
	defer f.Close()
	libs, _ := f.ImportedLibraries()
	for _, l := range libs {
		if strings.HasPrefix(l, "libjemalloc") {
			return true
		}
	}
	return false
}

// AddMaster starts a new cluster node that serves no slot (as an operator
// adds one before resharding onto it), has every running node meet it,
// waits until all know it, and adds it to c.Masters.
func (c *Cluster) AddMaster(t testing.TB) *Server {
	t.Helper()
	s := launch(t, clusterNodeArgs(clusterDirectives))
	host, port, _ := net.SplitHostPort(s.Addr)
	text, err := callCmd(s.Addr, time.Second, "CLUSTER", "NODES").Text()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	bus := ""
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "myself") {
			f := strings.Fields(line)[1]
			_, after, _ := strings.Cut(f, "@")
			bus, _, _ = strings.Cut(after, ",")
		}
	}
	for _, n := range c.all() {
		if n.running() {
			if _, err := call(n.Addr, time.Second, "CLUSTER", "MEET", host, port, bus); err != nil {
				t.Fatalf("redistest: CLUSTER MEET: %v", err)
			}
		}
	}
	poll(t, 20*time.Second, "all know the new node", func() error {
		id, err := c.idOf(s)
		if err != nil {
			return err
		}
		for _, n := range c.all() {
			if !n.running() {
				continue
			}
			nodes, err := clusterNodesOf(n.Addr)
			if err != nil {
				return err
			}
			found := false
			for _, x := range nodes {
				if x.id == id && !x.has("handshake") {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("%s does not know %s", n.Addr, s.Addr)
			}
		}
		return nil
	})
	poll(t, 20*time.Second, "new node ok", func() error {
		if st := infoOf(s.Addr, "CLUSTER", "INFO", "cluster_state"); st != "ok" {
			return fmt.Errorf("state %q", st)
		}
		return nil
	})
	c.mu.Lock()
	c.nodes = append(c.nodes, s)
	c.mu.Unlock()
	c.Masters = append(c.Masters, s)
	return s
}

// AddReplica starts a new cluster node as AddMaster does and makes it a
// replica of master, waiting until master counts it for WAIT; it is added
// to c.Replicas.
func (c *Cluster) AddReplica(t testing.TB, master *Server) *Server {
	t.Helper()
	s := c.AddMaster(t)
	c.Masters = c.Masters[:len(c.Masters)-1]
	mid, _ := c.idOf(master)
	if _, err := call(s.Addr, time.Second, "CLUSTER", "REPLICATE", mid); err != nil {
		t.Fatalf("redistest: CLUSTER REPLICATE: %v", err)
	}
	poll(t, 20*time.Second, "replica link up", func() error {
		if st := infoField(s.Addr, "replication", "master_link_status"); st != "up" {
			return fmt.Errorf("link %q", st)
		}
		return acked(master.Addr, "{x}ready-"+s.Addr, 1)
	})
	c.Replicas = append(c.Replicas, s)
	return s
}
