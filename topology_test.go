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

// On a 3-master cluster: names on every master; acquire, busy, blocking
// hand-off, extend, fencing, List and ResetAll.
func TestCluster(t *testing.T) {
	t.Parallel()
	long(t, "starts a 3-node cluster")
	cl := redistest.StartCluster(t, 3)
	ctx := ctxT(t)
	cc := cl.Client(t)

	// Python's untagged keys cannot work on a cluster: refused at New.
	if _, err := redislock.New(cc, "x", redislock.WithHashTag(false)); !errors.Is(err, redislock.ErrCrossSlot) {
		t.Fatalf("New(cluster, untagged) = %v, want ErrCrossSlot", err)
	}
	if _, err := redislock.New(cc, "a}b"); !errors.Is(err, redislock.ErrInvalidHashTag) {
		t.Fatalf("New(cluster, \"a}b\") = %v, want ErrInvalidHashTag", err)
	}

	// Pick names until every master holds some.
	perMaster := map[string][]string{}
	var names []string
	for i := 0; len(perMaster) < 3 || len(names) < 9; i++ {
		name := fmt.Sprintf("job-%d", i)
		m, err := cc.MasterForKey(ctx, "lock:{"+name+"}")
		if err != nil {
			t.Fatal(err)
		}
		perMaster[m.Options().Addr] = append(perMaster[m.Options().Addr], name)
		names = append(names, name)
	}
	var held []*redislock.Lock
	for _, name := range names {
		l := mustNew(t, cc, name, redislock.WithExpire(time.Minute), redislock.WithFencing())
		if err := l.Acquire(ctx); err != nil {
			t.Fatalf("Acquire(%s) on the cluster = %v", name, err)
		}
		if l.Key() != "lock:{"+name+"}" || l.Token() == 0 {
			t.Fatalf("key %q token %d", l.Key(), l.Token())
		}
		if err := l.Extend(ctx, 2*time.Minute); err != nil {
			t.Fatalf("Extend(%s) = %v", name, err)
		}
		held = append(held, l)
	}
	for addr, ns := range perMaster {
		c := redis.NewClient(&redis.Options{Addr: addr})
		n := c.DBSize(ctx).Val()
		c.Close()
		if n < int64(len(ns)) {
			t.Fatalf("master %s holds %d keys, want its %d locks", addr, n, len(ns))
		}
	}

	// Busy, then a blocking hand-off woken by the release.
	other := mustNew(t, cl.Client(t), names[0])
	if err := other.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("TryAcquire() of a held lock = %v, want ErrLocked", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	done := acquireAsync(wctx, other)
	node, err := cc.MasterForKey(ctx, held[0].Key())
	if err != nil {
		t.Fatal(err)
	}
	waitBlocked(t, node, 1)
	released := time.Now()
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	heldSoonAfter(t, done, released, "the waiter on the cluster")
	var infos []redislock.LockInfo

	infos, err = redislock.List(ctx, cc, "*")
	if err != nil || len(infos) != len(names) {
		t.Fatalf("List() on the cluster = %d locks, %v; want %d", len(infos), err, len(names))
	}
	n, err := redislock.ResetAll(ctx, cc)
	if err != nil || n != len(names) {
		t.Fatalf("ResetAll() on the cluster = %d, %v; want %d", n, err, len(names))
	}
	for _, l := range held[1:] {
		if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("Release() after ResetAll = %v, want ErrNotAcquired", err)
		}
	}
}

// failoverClient returns a Sentinel failover client of ss.
func failoverClient(t *testing.T, ss *redistest.Sentinels) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    redistest.MasterName,
		SentinelAddrs: ss.Addrs(),
		DialTimeout:   200 * time.Millisecond,
		MaxRetries:    -1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// startSentinels starts a primary, a replica of it and n sentinels that
// watch it.
func startSentinels(t *testing.T, n int) (primary, replica *redistest.Server, ss *redistest.Sentinels) {
	t.Helper()
	primary = redistest.Start(t)
	replica = redistest.StartReplica(t, primary)
	return primary, replica, redistest.StartSentinels(t, primary, n)
}

// failover and oldMasterHangs are the two ways the watch's failover tests
// take a Sentinel's master away: a SENTINEL FAILOVER, and a master that
// stops answering (SIGSTOP) while it still calls itself master.
func failover(t *testing.T, _ *redistest.Server, ss *redistest.Sentinels) { sentinelFailover(t, ss) }

func oldMasterHangs(t *testing.T, primary *redistest.Server, _ *redistest.Sentinels) {
	primary.Pause()
	t.Cleanup(primary.Cont)
}

// tryAfterFailover calls l.TryAcquire until the new primary answers (the
// lock is taken, or busy) or 30 s pass, and returns the last result.
func tryAfterFailover(ctx context.Context, l *redislock.Lock) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := l.TryAcquire(ctx)
		if err == nil || errors.Is(err, redislock.ErrLocked) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitFailover waits until the sentinels name want as the primary.
func awaitFailover(t *testing.T, ss *redistest.Sentinels, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for ss.MasterAddr() != want {
		if time.Now().After(deadline) {
			t.Fatalf("no failover to %s within 30s (sentinels say %q)", want, ss.MasterAddr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With WithReplicaAck the lock survives a failover: the key is on the new
// primary and a second client cannot take the lock.
func TestSentinelFailoverKeepsAckedLock(t *testing.T) {
	t.Parallel()
	long(t, "runs a Sentinel failover")
	primary, replica, ss := startSentinels(t, 3)
	ctx := ctxT(t)

	l := mustNew(t, failoverClient(t, ss), "job", redislock.WithExpire(time.Minute), redislock.WithReplicaAck(1, time.Second))
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() with replica ack = %v", err)
	}
	killed := time.Now()
	primary.Kill()
	awaitFailover(t, ss, replica.Addr)
	promoted := time.Since(killed)

	err := tryAfterFailover(ctx, mustNew(t, failoverClient(t, ss), "job"))
	usable := time.Since(killed)
	t.Logf("primary killed -> replica promoted: %v; -> lock usable again: %v", promoted, usable)
	if !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("second.TryAcquire() after failover = %v, want ErrLocked (the lock survived)", err)
	}
	if got := replica.Client().Get(ctx, "lock:job").Val(); got != l.ID() {
		t.Fatalf("new primary's lock:job = %q, want %q", got, l.ID())
	}
	// l's own client learns of the new primary from the sentinels, a while
	// later on a loaded machine: until then it dials the dead one.
	err = l.Release(ctx)
	for deadline := time.Now().Add(30 * time.Second); err != nil && !errors.Is(err, redislock.ErrNotAcquired) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		err = l.Release(ctx)
	}
	if err != nil {
		t.Fatalf("Release() on the new primary = %v", err)
	}
	if n := replica.Client().Exists(ctx, "lock:job").Val(); n != 0 {
		t.Fatal("lock:job still on the new primary after Release")
	}
}

// The loss window without replica ack: with the replication link down, a
// lock taken on the primary is lost when the primary dies, and a second
// client takes it on the promoted replica. With replica ack the same
// acquire is refused instead.
func TestSentinelFailoverLossWindow(t *testing.T) {
	t.Parallel()
	long(t, "runs a Sentinel failover")
	primary, replica, ss := startSentinels(t, 3)
	ctx := ctxT(t)
	admin := primary.Client()

	// Stall the link: the replica stops reading, the primary drops it.
	replica.Pause()
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		replica.Cont()
		t.Fatal(err)
	}

	acked := mustNew(t, failoverClient(t, ss), "acked", redislock.WithExpire(time.Minute), redislock.WithReplicaAck(1, 200*time.Millisecond))
	if err := acked.Acquire(ctx); !errors.Is(err, redislock.ErrNotReplicated) {
		replica.Cont()
		t.Fatalf("Acquire() with replica ack and no replica = %v, want ErrNotReplicated", err)
	}
	if n := admin.Exists(ctx, "lock:acked").Val(); n != 0 {
		replica.Cont()
		t.Fatal("an unacknowledged acquire left its key on the primary")
	}

	unacked := mustNew(t, failoverClient(t, ss), "job", redislock.WithExpire(time.Minute))
	if err := unacked.Acquire(ctx); err != nil {
		replica.Cont()
		t.Fatalf("Acquire() without ack = %v", err)
	}
	primary.Kill()
	replica.Cont()
	awaitFailover(t, ss, replica.Addr)

	if err := tryAfterFailover(ctx, mustNew(t, failoverClient(t, ss), "job")); err != nil {
		t.Fatalf("second.TryAcquire() after failover = %v, want nil: the unacknowledged lock is lost", err)
	}
	t.Log("without replica ack the first holder's lock was lost in the failover; the second client holds it too")
}

func TestCheck(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	c := s.Client()
	r, err := redislock.Check(ctx, c)
	if err != nil || !r.OK() {
		t.Fatalf("Check() on noeviction = %v, %v; want OK", r, err)
	}
	c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru")
	r, err = redislock.Check(ctx, c)
	if err != nil || r.OK() || r[0].Severity != redislock.SeverityProblem {
		t.Fatalf("Check() on allkeys-lru = %v, %v; want a problem", r, err)
	}
	t.Logf("allkeys-lru: %v", r[0])
	c.ConfigSet(ctx, "maxmemory-policy", "noeviction")

	// An ACL user without CONFIG: a warning, not an error.
	if err := c.Do(ctx, "ACL", "SETUSER", "limited", "on", ">pw", "~*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	limited := s.Client(func(o *redis.Options) { o.Username, o.Password = "limited", "pw" })
	r, err = redislock.Check(ctx, limited)
	if err != nil || !r.OK() || len(r) == 0 || r[0].Severity != redislock.SeverityWarning {
		t.Fatalf("Check() without CONFIG = %v, %v; want OK with a warning", r, err)
	}

	// Replicas: a warning without ack, nothing with ack(1), a problem with ack(2).
	redistest.StartReplica(t, s)
	r, _ = redislock.Check(ctx, c)
	if !r.OK() || !hasSeverity(r, redislock.SeverityWarning) {
		t.Fatalf("Check() with a replica and no ack = %v, want a warning", r)
	}
	if r, _ = redislock.Check(ctx, c, redislock.WithReplicaAck(1, 100*time.Millisecond)); hasSeverity(r, redislock.SeverityWarning) {
		t.Fatalf("Check() with a replica and ack(1) = %v, want no warning", r)
	}
	if r, _ = redislock.Check(ctx, c, redislock.WithReplicaAck(2, 100*time.Millisecond)); r.OK() {
		t.Fatalf("Check() with one replica and ack(2) = %v, want a problem", r)
	}
}

func hasSeverity(r redislock.Report, sev redislock.Severity) bool {
	for _, f := range r {
		if f.Severity == sev {
			return true
		}
	}
	return false
}

// An unacknowledged renewal counts as failed: with the replica stalled, the
// renewed hold is lost at its local deadline, with ErrNotReplicated as the
// last error.
func TestUnacknowledgedRenewalFails(t *testing.T) {
	t.Parallel()
	long(t, "stalls a replica")
	// Redis times WAIT out at its hz (100 ms by default), and a loaded
	// machine acknowledges slowly: a 1 s ack timeout, and an expire that
	// leaves room for a failed renewal.
	const expire = 4500 * time.Millisecond
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	ctx := ctxT(t)
	l := mustNew(t, primary.Client(), "job", redislock.WithExpire(expire), redislock.WithAutoRenewal(),
		redislock.WithReplicaAck(1, time.Second))
	sent := time.Now()
	mustAcquire(t, ctx, l)
	replica.Pause()
	defer replica.Cont()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("hold not lost with the replica stalled")
	}
	took := time.Since(sent)
	err := l.Err()
	if !errors.Is(err, redislock.ErrUnreachable) || !errors.Is(err, redislock.ErrNotReplicated) {
		t.Fatalf("Err() = %v, want ErrUnreachable wrapping ErrNotReplicated", err)
	}
	if took > expire+300*time.Millisecond {
		t.Fatalf("lost after %v, want by the %v expire", took, expire)
	}
	// The key itself was extended on the primary: the loss is local and
	// cautious. Release still cleans it up.
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() = %v", err)
	}
}
