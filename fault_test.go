package redislock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/faultproxy"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// proxyTo starts a fault proxy in front of s, closed when the test ends.
func proxyTo(t *testing.T, s *redistest.Server) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// clientVia returns a client of the server behind p, closed when the test
// ends (before p, which was started first).
func clientVia(t *testing.T, p *faultproxy.Proxy, opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: p.Addr()}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	proxied.Store(c, true)
	t.Cleanup(func() { proxied.Delete(c); c.Close() })
	return c
}

// proxied holds the clients made by clientVia (see mustNew).
var proxied sync.Map

// evalshaCalls returns how many EVALSHA commands c's server has run.
func evalshaCalls(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	return commandStats(t, c)["evalsha"]
}

// An acquire whose reply is lost is retried by go-redis: the retry finds
// our own id in the key and takes it again. No orphaned lock, no "busy".
// A raw SET NX (the broken variant) reports its own lock as taken. The
// scripts are cached first, so that the reply lost is that of an acquire
// that ran (not of a NOSCRIPT), and the server's count of EVALSHA calls
// shows that both the lost one and its retry ran.
func TestLostAcquireReplyIsRetried(t *testing.T) {
	quick(t)
	s := redistest.Start(t)
	p := proxyTo(t, s)
	ctx := ctxT(t)
	admin := s.Client()
	cacheScripts(t, admin)

	c := clientVia(t, p)
	if err := c.Ping(ctx).Err(); err != nil { // connect first: drop the acquire's reply, not the handshake's
		t.Fatal(err)
	}
	l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
	before := evalshaCalls(t, admin)
	p.DropNextReply()
	if err := l.TryAcquire(ctx); err != nil {
		t.Fatalf("TryAcquire() with its reply lost = %v, want nil (retried)", err)
	}
	if n := evalshaCalls(t, admin) - before; n != 2 {
		t.Fatalf("%d acquire scripts ran, want 2: the one whose reply was lost and its retry", n)
	}
	if got := admin.Get(ctx, "lock:job").Val(); got != l.ID() {
		t.Fatalf("lock:job = %q, want our id", got)
	}
	if n := admin.DBSize(ctx).Val(); n != 1 {
		t.Fatalf("%d keys after the retried acquire, want 1", n)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() = %v", err)
	}
	if keys := admin.Keys(ctx, "*").Val(); len(keys) != 2 || !slices.Contains(keys, "lock-signal:job") || !slices.Contains(keys, "lock-signal:job:turn") {
		t.Fatalf("keys after release = %q, want the signal list and its turn key", keys)
	}

	raw := clientVia(t, p)
	if err := raw.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.DropNextReply()
	ok, err := raw.SetNX(ctx, "raw-lock", "me", time.Minute).Result()
	if err != nil || ok {
		t.Fatalf("raw SET NX with its reply lost = %v, %v; want false: its own lock looks busy", ok, err)
	}
	if got := admin.Get(ctx, "raw-lock").Val(); got != "me" {
		t.Fatalf("raw-lock = %q", got)
	}
}

// The acquire whose reply is lost for good (the connection dies and
// go-redis does not retry) leaves no orphan: it is given back. The scripts
// are cached first, so that the acquire really ran. The broken variant, a
// raw SET NX PX with no giveback, leaves its key behind, held by an owner
// that was told it failed: the same check catches it.
func TestLostAcquireReplyWithoutRetryIsGivenBack(t *testing.T) {
	quick(t)
	andBroken(t, "giveback", "raw SET NX", func(t *testing.T, broken bool) {
		s := redistest.Start(t)
		p := proxyTo(t, s)
		ctx := ctxT(t)
		admin := s.Client()
		cacheScripts(t, admin)
		c := clientVia(t, p, func(o *redis.Options) { o.MaxRetries = -1 })
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
		before := evalshaCalls(t, admin)
		p.DropNextReply()
		var err error
		if broken {
			err = c.SetNX(ctx, l.Key(), "raw-owner", time.Minute).Err()
		} else {
			err = l.TryAcquire(ctx)
		}
		if err == nil {
			t.Fatal("acquire with its reply lost and no retry = nil, want an error")
		}
		if !broken {
			// The giveback runs in the background; the next call on
			// the Lock waits for it.
			if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
				t.Fatalf("Release() after the given-back acquire = %v, want ErrNotAcquired", err)
			}
			// The lost acquire really ran (not a NOSCRIPT), once; then
			// the giveback and the release. (Counted only now: the
			// giveback may run before TryAcquire has returned.)
			if n := evalshaCalls(t, admin) - before; n != 3 {
				t.Fatalf("%d scripts ran, want 3: the acquire, its giveback, the release", n)
			}
		}
		owner := admin.Get(ctx, "lock:job").Val()
		if orphaned := owner != ""; orphaned != broken {
			t.Fatalf("lock:job = %q after an acquire that failed: orphaned = %v, want %v", owner, orphaned, broken)
		}
	})
}

// During a blackhole a 300 ms deadline ends the wait within 600 ms with
// ContextTimeoutEnabled, and within the client's read timeout + 300 ms
// without (go-redis then ignores the deadline while it reads).
func TestBlackholeDeadline(t *testing.T) {
	t.Parallel()
	long(t, "blackholes the connection")
	for _, tc := range []struct {
		name  string
		opts  func(*redis.Options)
		bound time.Duration
	}{
		{"ContextTimeoutEnabled", func(o *redis.Options) { o.ContextTimeoutEnabled = true }, 600 * time.Millisecond},
		{"go-redis defaults", func(*redis.Options) {}, -1}, // the read timeout + 300 ms
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			p := proxyTo(t, s)
			ctx := ctxT(t)
			mustAcquire(t, ctx, mustNew(t, s.Client(), "job"))
			c := clientVia(t, p, tc.opts)
			if err := c.Ping(ctx).Err(); err != nil { // a warm connection, as in a running service
				t.Fatal(err)
			}
			bound := tc.bound
			if bound < 0 {
				bound = c.Options().ReadTimeout + 300*time.Millisecond
			}
			waiter := mustNew(t, c, "job")
			p.Blackhole(true)
			defer p.Blackhole(false)
			dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := waiter.Acquire(dctx)
			took := time.Since(start)
			t.Logf("Acquire(300ms) through a blackhole returned after %v: %v", took, err)
			// Redis never answered: not ErrLocked, which would have a cron
			// job skip its run as if the lock were busy.
			if errors.Is(err, redislock.ErrLocked) || !errors.Is(err, redislock.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Acquire() = %v, want ErrUnreachable and DeadlineExceeded, not ErrLocked", err)
			}
			if took > bound {
				t.Fatalf("Acquire(300ms) returned after %v, want within %v", took, bound)
			}
		})
	}
}
