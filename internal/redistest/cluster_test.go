package redistest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestCluster runs the cluster helpers on one 3-master, 3-replica cluster,
// in order: each subtest leaves the cluster whole for the next.
func TestCluster(t *testing.T) {
	c := StartClusterWithReplicas(t, 3, 1)
	ctx := context.Background()

	t.Run("Topology", func(t *testing.T) {
		if len(c.Masters) != 3 || len(c.Replicas) != 3 {
			t.Fatalf("%d masters and %d replicas, want 3 and 3", len(c.Masters), len(c.Replicas))
		}
		var all []*Server
		for _, m := range c.Masters {
			rs := c.ReplicasOf(m)
			if len(rs) != 1 {
				t.Fatalf("master %s has replicas %v, want one", m.Addr, addrsOf(rs))
			}
			r := rs[0]
			if role := infoField(r.Addr, "replication", "role"); role != "slave" {
				t.Errorf("replica %s: role %q", r.Addr, role)
			}
			if port := infoField(r.Addr, "replication", "master_port"); port != portOf(m) {
				t.Errorf("replica %s replicates port %s, not %s", r.Addr, port, portOf(m))
			}
			all = append(all, r)
		}
		if !sameServers(all, c.Replicas) {
			t.Errorf("ReplicasOf gives %v, Replicas is %v", addrsOf(all), addrsOf(c.Replicas))
		}
	})

	t.Run("Slot", func(t *testing.T) {
		rc := c.Masters[0].Client()
		for _, key := range []string{"foo", "lock", "{user1000}.following", "{user1000}.followers",
			"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "{", "}{a}", ""} {
			want, err := rc.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := Slot(key); got != int(want) {
				t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
			}
		}
		for _, slot := range []int{0, 1, 5460, 5461, 16383} {
			k := KeyForSlot(slot)
			if Slot(k) != slot || Slot("lock:"+k+":x") != slot {
				t.Errorf("KeyForSlot(%d) = %q, in slot %d", slot, k, Slot(k))
			}
		}
		for i, m := range c.Masters {
			me, err := myselfOf(m.Addr)
			if err != nil {
				t.Fatal(err)
			}
			slot := me.slots[0][0]
			if got := c.MasterOf(t, slot); got != m {
				t.Errorf("MasterOf(%d) = %s, want master %d %s", slot, got.Addr, i, m.Addr)
			}
		}
	})

	t.Run("Migration", func(t *testing.T) {
		cl := c.Client(t)
		const tag = "{migration}"
		slot := Slot(tag)
		from := c.MasterOf(t, slot)
		to := otherMaster(c, from)
		key := tag + ":key"
		if err := cl.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		pipe := cl.Pipeline() // more than one MIGRATE batch
		for i := 0; i < 150; i++ {
			pipe.Set(ctx, tag+":"+string(rune('a'+i%26))+strings.Repeat("x", i), i, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}

		m := c.BeginMigration(t, slot, to)
		if m.From != from || m.To != to || m.Slot != slot {
			t.Fatalf("migration %+v, want slot %d from %s to %s", m, slot, from.Addr, to.Addr)
		}
		src, dst := from.Client(), to.Client()
		if v, err := src.Get(ctx, key).Result(); err != nil || v != "v" {
			t.Fatalf("GET on the source before MoveKeys: %q, %v", v, err)
		}
		m.MoveKeys(t)
		if err := src.Get(ctx, key).Err(); err == nil || !strings.HasPrefix(err.Error(), "ASK ") {
			t.Fatalf("GET of a moved key on the source: %v, want ASK", err)
		}
		if err := dst.Get(ctx, key).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
			t.Fatalf("GET on the target without ASKING: %v, want MOVED", err)
		}
		var get *redis.StringCmd
		if _, err := dst.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "ASKING")
			get = p.Get(ctx, key)
			return nil
		}); err != nil || get.Val() != "v" {
			t.Fatalf("ASKING GET on the target: %q, %v", get.Val(), err)
		}
		if v, err := cl.Get(ctx, key).Result(); err != nil || v != "v" {
			t.Fatalf("cluster client GET during the migration: %q, %v", v, err)
		}
		m.MoveKeys(t) // nothing left: a no-op
		if n, _ := dst.ClusterCountKeysInSlot(ctx, slot).Result(); n != 151 {
			t.Errorf("%d keys on the target, want 151", n)
		}
		m.Finish(t)
		if got := c.MasterOf(t, slot); got != to {
			t.Fatalf("after Finish slot %d is on %s, want %s", slot, got.Addr, to.Addr)
		}
		if v, err := c.Client(t).Get(ctx, key).Result(); err != nil || v != "v" {
			t.Fatalf("fresh cluster client GET after Finish: %q, %v", v, err)
		}
		if v, err := cl.Get(ctx, key).Result(); err != nil || v != "v" {
			t.Fatalf("old cluster client GET after Finish: %q, %v", v, err)
		}

		c.MigrateSlot(t, slot, from) // and back in one step
		if got := c.MasterOf(t, slot); got != from {
			t.Fatalf("after MigrateSlot slot %d is on %s, want %s", slot, got.Addr, from.Addr)
		}
		if n, _ := src.ClusterCountKeysInSlot(ctx, slot).Result(); n != 151 {
			t.Errorf("%d keys back on the source, want 151", n)
		}
		if v, err := c.Client(t).Get(ctx, key).Result(); err != nil || v != "v" {
			t.Fatalf("fresh cluster client GET after MigrateSlot: %q, %v", v, err)
		}
	})

	t.Run("ManualFailover", func(t *testing.T) {
		const key = "{manual}:key"
		old := c.MasterOf(t, Slot(key))
		writeAcked(t, old, key, "v")
		replica := c.ReplicasOf(old)[0]
		start := time.Now()
		c.ManualFailover(t, replica)
		t.Logf("manual failover took %v", time.Since(start).Round(time.Millisecond))
		if got := c.MasterOf(t, Slot(key)); got != replica {
			t.Fatalf("slot of %s on %s, want %s", key, got.Addr, replica.Addr)
		}
		if rs := c.ReplicasOf(replica); len(rs) != 1 || rs[0] != old {
			t.Errorf("replicas of the new master: %v, want %s", addrsOf(rs), old.Addr)
		}
		if !slices.Contains(c.Masters, replica) || slices.Contains(c.Masters, old) ||
			!slices.Contains(c.Replicas, old) || slices.Contains(c.Replicas, replica) {
			t.Errorf("Masters %v, Replicas %v after the failover", addrsOf(c.Masters), addrsOf(c.Replicas))
		}
		if v, err := c.Client(t).Get(ctx, key).Result(); err != nil || v != "v" {
			t.Fatalf("GET after the failover: %q, %v", v, err)
		}
	})

	t.Run("KillMaster", func(t *testing.T) {
		const key = "{kill}:key"
		master := c.MasterOf(t, Slot(key))
		writeAcked(t, master, key, "v")
		replicas := c.ReplicasOf(master)
		start := time.Now()
		promoted := c.KillMaster(t, master)
		t.Logf("failover after SIGKILL took %v", time.Since(start).Round(time.Millisecond))
		if !slices.Contains(replicas, promoted) {
			t.Fatalf("promoted %s, not a replica of %s (%v)", promoted.Addr, master.Addr, addrsOf(replicas))
		}
		if got := c.MasterOf(t, Slot(key)); got != promoted {
			t.Fatalf("slot of %s on %s, want %s", key, got.Addr, promoted.Addr)
		}
		if len(c.Masters) != 3 || slices.Contains(c.Masters, master) || !slices.Contains(c.Masters, promoted) ||
			slices.Contains(c.Replicas, promoted) || slices.Contains(c.Replicas, master) {
			t.Errorf("Masters %v, Replicas %v after the failover", addrsOf(c.Masters), addrsOf(c.Replicas))
		}
		if v, err := c.Client(t).Get(ctx, key).Result(); err != nil || v != "v" {
			t.Fatalf("GET through a fresh cluster client after the failover: %q, %v", v, err)
		}

		// Restarted, the killed master rejoins as a replica of the promoted.
		master.Restart()
		promotedID, _ := c.idOf(promoted)
		poll(t, 10*time.Second, "the killed master rejoining as a replica", func() error {
			if me, err := myselfOf(master.Addr); err != nil || !me.has("slave") || me.masterID != promotedID {
				return errors.New("not a replica of the promoted master yet")
			}
			return nil
		})
	})
}

// writeAcked sets key on master and fails t unless a replica acknowledged
// it (WAIT on the same connection).
func writeAcked(t *testing.T, master *Server, key, value string) {
	t.Helper()
	ctx := context.Background()
	var wait *redis.Cmd
	_, err := master.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, value, 0)
		wait = p.Do(ctx, "WAIT", 1, 2000)
		return nil
	})
	if n, _ := wait.Int(); err != nil || n < 1 {
		t.Fatalf("SET %s on %s and WAIT: %d replicas, %v", key, master.Addr, n, err)
	}
}

func otherMaster(c *Cluster, not *Server) *Server {
	for _, m := range c.Masters {
		if m != not {
			return m
		}
	}
	return nil
}

func addrsOf(ss []*Server) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Addr)
	}
	return out
}

func portOf(s *Server) string {
	_, p, _ := strings.Cut(s.Addr, ":")
	return p
}

func sameServers(a, b []*Server) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

func TestStartSkewed(t *testing.T) {
	ctx := context.Background()
	for _, offset := range []time.Duration{90 * time.Second, -45 * time.Second} {
		s := StartSkewed(t, offset)
		c := s.Client()
		checkSkew(t, s, offset)

		// The expiry clock is skewed too: EX 100 expires at skewed now + 100.
		if err := c.Set(ctx, "k", "v", 100*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		at, err := c.Do(ctx, "EXPIRETIME", "k").Int64()
		if err != nil {
			t.Fatal(err)
		}
		want := time.Now().Add(offset + 100*time.Second)
		if d := time.Unix(at, 0).Sub(want); d < -2*time.Second || d > 2*time.Second {
			t.Errorf("offset %v: EXPIRETIME %v, want about %v", offset, time.Unix(at, 0), want)
		}
	}

	s := StartSkewed(t, -30*time.Second, "maxmemory 10mb")
	s.Restart()
	checkSkew(t, s, -30*time.Second) // kept across Restart
	if v := infoField(s.Addr, "memory", "maxmemory"); v != "10485760" {
		t.Errorf("maxmemory %q: the extra directives were not passed", v)
	}
}

func TestStartSkewedReplica(t *testing.T) {
	ctx := context.Background()
	p := Start(t)
	r := StartSkewedReplica(t, p, 30*time.Second)
	checkSkew(t, p, 0)
	checkSkew(t, r, 30*time.Second)
	pc := p.Client()
	var wait *redis.Cmd
	if _, err := pc.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, "k", "v", 0)
		wait = pipe.Do(ctx, "WAIT", 1, 2000)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, _ := wait.Int(); n != 1 {
		t.Fatalf("WAIT: %d replicas", n)
	}
	if v, err := r.Client().Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET on the skewed replica: %q, %v", v, err)
	}
}

// checkSkew fails t unless the server's TIME is the real time plus offset,
// give or take 2 s.
func checkSkew(t *testing.T, s *Server, offset time.Duration) {
	t.Helper()
	now, err := s.Client().Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := now.Sub(time.Now()) - offset; d < -2*time.Second || d > 2*time.Second {
		t.Errorf("%s: TIME %v, %v off the real clock, want %v", s.Addr, now, now.Sub(time.Now()).Round(time.Millisecond), offset)
	}
}

func TestFakeTimeOffset(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{60 * time.Second, "+60"}, {-5 * time.Second, "-5"}, {0, "+0"},
		{1400 * time.Millisecond, "+1"}, {-1500 * time.Millisecond, "-2"}, {2 * time.Hour, "+7200"},
	} {
		if got := fakeTimeOffset(c.d); got != c.want {
			t.Errorf("fakeTimeOffset(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestParseClusterNodes(t *testing.T) {
	text := `07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922 [10923->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 7000 [10923-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
`
	nodes, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("%d nodes", len(nodes))
	}
	r, m, me := nodes[0], nodes[1], nodes[2]
	if r.addr != "127.0.0.1:30004" || !r.has("slave") || r.masterID != me.id || len(r.slots) != 0 {
		t.Errorf("replica %+v", r)
	}
	if !m.owns(5461) || !m.owns(10922) || m.owns(10923) || m.epoch != 2 {
		t.Errorf("master %+v", m)
	}
	if !me.has("myself") || !me.owns(7000) || me.owns(7001) || me.owns(10923) || !me.ownsAll([][2]int{{0, 5460}}) {
		t.Errorf("myself %+v", me)
	}
	if o, ok := ownerIn(nodes, 6000); !ok || o.id != m.id {
		t.Errorf("owner of 6000: %+v", o)
	}
}
