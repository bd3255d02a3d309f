package redislock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// A Semaphore permit's or an RWMutex read permit's acquire whose reply was
// lost is retried (go-redis retries it on a new connection): the retry
// finds the permit's own random id already in and holds it, as a Lock's
// does, rather than refusing it as held.
func TestFamilyLostAcquireReplyIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holders string
		take    func(t *testing.T, c *redis.Client) (*redislock.Permit, error)
	}{
		{"semaphore", "lock-sem:{pool}", func(t *testing.T, c *redis.Client) (*redislock.Permit, error) {
			return mustSemaphore(t, c, "pool", 2).TryAcquire(ctxT(t))
		}},
		{"rwmutex-reader", "lock-rw-readers:{cfg}", func(t *testing.T, c *redis.Client) (*redislock.Permit, error) {
			return newRWMutex(t, c, "cfg").TryRLock(ctxT(t))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			p := proxyTo(t, s)
			ctx := ctxT(t)
			admin := s.Client()
			cacheScripts(t, admin)
			c := clientVia(t, p)
			if err := c.Ping(ctx).Err(); err != nil { // connect first: drop the acquire's reply, not the handshake's
				t.Fatal(err)
			}
			before := evalshaCalls(t, admin)
			p.DropNextReply()
			permit, err := tc.take(t, c)
			if err != nil {
				t.Fatalf("acquire with its reply lost = %v, want the permit (retried)", err)
			}
			if n := evalshaCalls(t, admin) - before; n != 2 {
				t.Fatalf("%d acquire scripts ran, want 2: the one whose reply was lost and its retry", n)
			}
			if ids := admin.ZRange(ctx, tc.holders, 0, -1).Val(); len(ids) != 1 || ids[0] != permit.ID() {
				t.Fatalf("holders = %q, want the permit's id %q alone", ids, permit.ID())
			}
			if err := permit.Release(ctx); err != nil {
				t.Fatalf("Release = %v", err)
			}
		})
	}
}

// A permit taken under a caller-given id whose acquire's reply is lost for
// good (no retry) is given back only if it is its own: another Semaphore
// holding under that same id keeps its permit.
func TestSemaphoreGivebackSparesTheSameGivenID(t *testing.T) {
	s := redistest.Start(t)
	p := proxyTo(t, s)
	ctx := ctxT(t)
	admin := s.Client()
	cacheScripts(t, admin)
	holder := mustSemaphore(t, s.Client(), "pool", 2, redislock.WithID("worker-1"), redislock.WithExpire(time.Minute))
	kept, err := holder.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := clientVia(t, p, func(o *redis.Options) { o.MaxRetries = -1 })
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	other := mustSemaphore(t, c, "pool", 2, redislock.WithID("worker-1"), redislock.WithExpire(time.Minute))
	p.DropNextReply()
	if _, err := other.TryAcquire(ctx); err == nil {
		t.Fatal("TryAcquire under a held given id, its reply lost = nil, want an error")
	}
	if err := other.Settle(ctx); err != nil { // the giveback has run
		t.Fatal(err)
	}
	if _, err := admin.ZScore(ctx, "lock-sem:{pool}", "worker-1").Result(); err != nil {
		t.Fatalf("the first holder's permit after the other's giveback: %v; want it kept", err)
	}
	if err := kept.Release(ctx); err != nil {
		t.Fatalf("the first holder's Release = %v, want nil", err)
	}
}
