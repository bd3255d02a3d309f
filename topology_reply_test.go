package redislock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// Replies that mean "the slot is moving, not now": the command did not
// run. The tests below make them with a hook, on one node; the cluster
// tests (topology_change_test.go) meet the real ones.

// replyErr is an error reply from Redis, as go-redis returns them.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (e replyErr) RedisError()   {}

const tryAgain = replyErr("TRYAGAIN Multiple keys request during rehashing of slot")

// refuse returns a hook that answers the commands match picks with reply,
// without sending them, while *left > 0 (for ever when left is nil), and
// counts them in refused.
func refuse(match func(redis.Cmder) bool, reply error, left *atomic.Int32, refused *atomic.Int32) commandHook {
	return func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if match(cmd) && (left == nil || left.Add(-1) >= 0) {
			refused.Add(1)
			cmd.SetErr(reply)
			return reply
		}
		return next(ctx, cmd)
	}
}

// isRelease matches the release script: two keys and two arguments.
func isRelease(cmd redis.Cmder) bool { return scriptOf(cmd) == "release" }

// noRawTopology fails t when err shows a topology reply: every call must
// end in the lock's own result.
func noRawTopology(t *testing.T, what string, err error) {
	t.Helper()
	for _, p := range []string{"MOVED", "ASK ", "TRYAGAIN", "CLUSTERDOWN"} {
		if err != nil && strings.Contains(err.Error(), p) {
			t.Fatalf("%s = %v: a raw topology reply", what, err)
		}
	}
}

// A release answered TRYAGAIN (its two keys during a slot migration) is
// sent again until it runs, within its context.
func TestReleaseRetriesTryAgain(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
		mustAcquire(t, ctx, l)
		var left, refused atomic.Int32
		left.Store(8)
		c.AddHook(refuse(isRelease, tryAgain, &left, &refused))
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release() = %v", err)
		}
		if n := refused.Load(); n < 8 {
			t.Fatalf("the release was refused %d times, want 8", n)
		}
		if err := l.Err(); !errors.Is(err, redislock.ErrReleased) {
			t.Fatalf("Err() = %v, want ErrReleased", err)
		}
		if n := b.client().Exists(ctx, l.Key()).Val(); n != 0 {
			t.Fatal("the key is still there")
		}
	})
}

// A release that Redis refused until the call's context ended did not
// happen: Release says so, Err does not claim ErrReleased, the key still
// holds the id, and the next Release deletes it.
func TestRefusedReleaseIsNotReportedReleased(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
		mustAcquire(t, ctx, l)
		id := l.ID()
		var left, refused atomic.Int32
		left.Store(1 << 30)
		c.AddHook(refuse(isRelease, tryAgain, &left, &refused))
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := l.Release(rctx)
		cancel()
		if err == nil {
			t.Fatal("Release() = nil, though Redis ran no release")
		}
		if refused.Load() < 2 {
			t.Fatalf("refused %d times: TRYAGAIN was not retried", refused.Load())
		}
		if err := l.Err(); errors.Is(err, redislock.ErrReleased) || !errors.Is(err, redislock.ErrUnreachable) || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("Err() = %v, want a loss with ErrUnreachable that says the release was refused (not that it got no reply), not ErrReleased", err)
		}
		if owner := b.client().Get(ctx, l.Key()).Val(); owner != id {
			t.Fatalf("key holds %q, want the id %q still", owner, id)
		}
		left.Store(0) // the migration is over
		if err := l.Release(ctx); err != nil {
			t.Fatalf("second Release() = %v", err)
		}
		if n := b.client().Exists(ctx, l.Key()).Val(); n != 0 {
			t.Fatal("the second Release left the key")
		}
		mustAcquire(t, ctx, l) // the Lock is usable again
	})
}

// A fenced acquire of a free lock touches two keys, and during a slot
// migration meets TRYAGAIN: it is retried and ends in the lock's result.
func TestFencedAcquireRetriesTryAgain(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		l := mustNew(t, c, "job", redislock.WithExpire(time.Minute), redislock.WithFencing())
		isFencedAcquire := func(cmd redis.Cmder) bool {
			if scriptOf(cmd) != "acquire" {
				return false
			}
			for _, a := range cmd.Args() {
				if k, ok := a.(string); ok && strings.HasPrefix(k, "lock-fence:") {
					return true
				}
			}
			return false
		}
		var left, refused atomic.Int32
		left.Store(5)
		c.AddHook(refuse(isFencedAcquire, tryAgain, &left, &refused))
		err := l.TryAcquire(ctx)
		noRawTopology(t, "TryAcquire()", err)
		if err != nil {
			t.Fatalf("TryAcquire() = %v", err)
		}
		if refused.Load() != 5 || l.Token() == 0 {
			t.Fatalf("refused %d times, token %d", refused.Load(), l.Token())
		}
	})
}

// A call whose context has no deadline retries a topology reply no longer
// than its patience (10 s; 500 ms here): a resharding that died
// halfway leaves a slot migrating for ever. Then it returns the reply.
func TestTopologyRetryGivesUp(t *testing.T) {
	quick(t)
	b := miniBackend(t)
	c := b.client()
	redislock.SetTopologyPatience(t, c, 500*time.Millisecond)
	l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
	var refused atomic.Int32
	c.AddHook(refuse(func(cmd redis.Cmder) bool { return scriptOf(cmd) == "acquire" }, tryAgain, nil, &refused))
	start := time.Now()
	err := l.TryAcquire(context.Background())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "TRYAGAIN") {
		t.Fatalf("TryAcquire() = %v, want the TRYAGAIN after giving up", err)
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Fatalf("gave up after %v, want about 500 ms", took)
	}
	t.Logf("gave up after %v and %d attempts", took, refused.Load())
}

// A go-redis Ring is refused, before anything is sent: its shards would
// split a lock's key from its signal list (a waiter sleeps through the
// release) and send WAIT to any shard.
func TestRingIsRefused(t *testing.T) {
	quick(t)
	m := miniBackend(t).mini
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": m.Addr()}})
	t.Cleanup(func() { ring.Close() })
	ctx := ctxT(t)
	before := m.CommandCount()
	_, err := redislock.New(ring, "job")
	if !errors.Is(err, redislock.ErrUnsupportedClient) || !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Fatalf("New(ring) = %v, want ErrUnsupportedClient", err)
	}
	if _, err := redislock.List(ctx, ring, ""); !errors.Is(err, redislock.ErrUnsupportedClient) {
		t.Fatalf("List(ring) = %v", err)
	}
	if _, err := redislock.ResetAll(ctx, ring); !errors.Is(err, redislock.ErrUnsupportedClient) {
		t.Fatalf("ResetAll(ring) = %v", err)
	}
	if _, err := redislock.Check(ctx, ring); !errors.Is(err, redislock.ErrUnsupportedClient) {
		t.Fatalf("Check(ring) = %v", err)
	}
	// A type around a Ring is a Ring too.
	type wrapped struct{ *redis.Ring }
	if _, err := redislock.New(wrapped{ring}, "job"); !errors.Is(err, redislock.ErrUnsupportedClient) {
		t.Fatalf("New(a type embedding a Ring) = %v, want ErrUnsupportedClient", err)
	}
	if n := m.CommandCount() - before; n != 0 {
		t.Fatalf("%d commands sent", n)
	}
}

// An ack timeout above a third of the read timeout is refused by New and
// Check alike: the BLPOP slices would shrink to nothing.
func TestAckTimeoutBound(t *testing.T) {
	quick(t)
	m := miniBackend(t).mini
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ReadTimeout: 3 * time.Second})
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	if _, err := redislock.New(c, "job", redislock.WithReplicaAck(1, time.Second)); err != nil {
		t.Fatalf("New with ack 1 s of a 3 s read timeout = %v", err)
	}
	before := m.CommandCount()
	for _, ack := range []time.Duration{time.Second + time.Millisecond, 2 * time.Second} {
		if _, err := redislock.New(c, "job", redislock.WithReplicaAck(1, ack)); !errors.Is(err, redislock.ErrInvalidReplicaAck) {
			t.Fatalf("New with ack %v = %v, want ErrInvalidReplicaAck", ack, err)
		}
		if _, err := redislock.Check(ctx, c, redislock.WithReplicaAck(1, ack)); !errors.Is(err, redislock.ErrInvalidReplicaAck) {
			t.Fatalf("Check with ack %v = %v, want ErrInvalidReplicaAck", ack, err)
		}
	}
	if n := m.CommandCount() - before; n != 0 {
		t.Fatalf("%d commands sent", n)
	}
}

// With the largest ack timeout New accepts (a third of the read timeout,
// here go-redis's default 3 s), a waiter still sleeps in long BLPOPs: no
// more than four in 3 s of waiting (the review measured 30 in 3 s with a
// 3.3 s ack on a 5 s read timeout, which New now refuses).
func TestAckAtItsLimitKeepsSlicesLong(t *testing.T) {
	t.Parallel()
	long(t, "starts a replica")
	primary := redistest.Start(t)
	redistest.StartReplica(t, primary)
	ctx := ctxT(t)
	admin := primary.Client()
	ack := redislock.WithReplicaAck(1, time.Second)
	holder := mustNew(t, primary.Client(), "job", redislock.WithExpire(time.Minute), ack)
	mustAcquire(t, ctx, holder)
	waiter := mustNew(t, primary.Client(), "job", redislock.WithExpire(time.Minute), ack)
	before := commandStats(t, admin)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := waiter.Acquire(wctx)
	cancel()
	if !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("Acquire() = %v, want ErrLocked at the deadline", err)
	}
	if err := waiter.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	d := delta(before, commandStats(t, admin))
	t.Logf("3 s of waiting with a 1 s ack on a 3 s read timeout: %d BLPOP, %d WAIT", d["blpop"], d["wait"])
	if d["blpop"] < 1 || d["blpop"] > 4 {
		t.Fatalf("%d BLPOPs in 3 s, want 1 to 4: waiting must not turn into polling", d["blpop"])
	}
}
