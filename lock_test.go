package redislock_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/wire"
)

func TestTryAcquireBusyThenFree(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		holder := mustNew(t, b.client(), "job")
		other := mustNew(t, b.client(), "job")

		if err := holder.TryAcquire(ctx); err != nil {
			t.Fatalf("holder.TryAcquire() = %v, want nil", err)
		}
		if err := other.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("other.TryAcquire() while held = %v, want ErrLocked", err)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("holder.Release() = %v, want nil", err)
		}
		if err := other.TryAcquire(ctx); err != nil {
			t.Fatalf("other.TryAcquire() once free = %v, want nil", err)
		}
		if got, _ := other.OwnerID(ctx); got != other.ID() {
			t.Fatalf("OwnerID() = %q, want %q", got, other.ID())
		}
	})
}

func TestAcquireContextEnds(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		holder := mustNew(t, b.client(), "job")
		if err := holder.Acquire(ctx); err != nil {
			t.Fatalf("holder.Acquire() = %v", err)
		}
		waiter := mustNew(t, b.client(), "job")

		dctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		err := waiter.Acquire(dctx)
		if !errors.Is(err, redislock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire(deadline) = %v, want ErrLocked and DeadlineExceeded", err)
		}

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err = waiter.Acquire(cctx)
		// Nothing was asked, so nothing is known of the lock: the
		// context's error alone.
		if errors.Is(err, redislock.ErrLocked) || errors.Is(err, redislock.ErrUnreachable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire(cancelled) = %v, want Canceled alone", err)
		}
		if got, _ := waiter.OwnerID(ctx); got != holder.ID() {
			t.Fatalf("after failed waits OwnerID() = %q, want holder %q", got, holder.ID())
		}
		// The failed waits left the waiter free to try again.
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := waiter.Acquire(ctx); err != nil {
			t.Fatalf("Acquire() after release = %v", err)
		}
	})
}

func TestReleaseByNonOwnerChangesNothing(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		holder := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
		other := mustNew(t, c, "job")
		mustAcquire(t, ctx, holder)
		ttlBefore := c.PTTL(ctx, holder.Key()).Val()
		if err := other.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("other.Release() = %v, want ErrNotAcquired", err)
		}
		if got := c.Get(ctx, holder.Key()).Val(); got != holder.ID() {
			t.Fatalf("value after foreign release = %q, want %q", got, holder.ID())
		}
		if got := c.PTTL(ctx, holder.Key()).Val(); got > ttlBefore || got < ttlBefore-5*time.Second {
			t.Fatalf("PTTL after foreign release = %v, want about %v", got, ttlBefore)
		}
		if n := c.Exists(ctx, "lock-signal:job").Val(); n != 0 {
			t.Fatalf("foreign release pushed a signal (EXISTS = %d)", n)
		}
		// Releasing a free lock is ErrNotAcquired too.
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := holder.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("second Release() = %v, want ErrNotAcquired", err)
		}
	})
}

func TestSharedIDExtendsAndReleases(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		first := mustNew(t, c, "job", redislock.WithExpire(10*time.Second))
		mustAcquire(t, ctx, first)
		second := mustNew(t, c, "job", redislock.WithID(first.ID()))
		if err := second.Extend(ctx, time.Minute); err != nil {
			t.Fatalf("second.Extend() = %v, want nil", err)
		}
		if got := c.PTTL(ctx, first.Key()).Val(); got <= 10*time.Second {
			t.Fatalf("PTTL after extend by id = %v, want > 10s", got)
		}
		if err := second.Release(ctx); err != nil {
			t.Fatalf("second.Release() = %v, want nil", err)
		}
		if n := c.Exists(ctx, first.Key()).Val(); n != 0 {
			t.Fatal("key still exists after release by id")
		}
	})
}

func TestAlreadyAcquired(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		a := mustNew(t, c, "job", redislock.WithID("worker-1"))
		mustAcquire(t, ctx, a)
		// The same Lock again waits its turn, as a sync.Mutex (see
		// TestSharedLockIsAMutex); TryAcquire finds it busy.
		if err := a.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("TryAcquire() on a held Lock = %v, want ErrLocked", err)
		}
		// Another Lock with the same caller-given id: refused by the script,
		// blocking or not, rather than waiting for itself.
		twin := mustNew(t, c, "job", redislock.WithID("worker-1"))
		if err := twin.TryAcquire(ctx); !errors.Is(err, redislock.ErrAlreadyAcquired) {
			t.Fatalf("twin.TryAcquire() = %v, want ErrAlreadyAcquired", err)
		}
		if err := twin.Acquire(ctx); !errors.Is(err, redislock.ErrAlreadyAcquired) {
			t.Fatalf("twin.Acquire() = %v, want ErrAlreadyAcquired", err)
		}
		if got := c.Get(ctx, a.Key()).Val(); got != "worker-1" {
			t.Fatalf("value = %q, want worker-1", got)
		}
	})
}

// A lost reply retried by go-redis finds our own random id in the key: that
// is success, not "busy", and the key gets a fresh expire (the local
// validity clock starts at the retry).
func TestOwnRandomIDInKeyCountsAsAcquired(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
		c.Set(ctx, l.Key(), l.ID(), time.Second) // as if a first try had run unseen
		if err := l.TryAcquire(ctx); err != nil {
			t.Fatalf("TryAcquire() with own id in key = %v, want nil", err)
		}
		if got := c.PTTL(ctx, l.Key()).Val(); got < 30*time.Second {
			t.Fatalf("PTTL after re-taking own key = %v, want the fresh 1m expire", got)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release() = %v", err)
		}
	})
}

func TestExtend(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()

		// Sub-second expires work in acquire and extend.
		l := mustNew(t, c, "job", redislock.WithExpire(300*time.Millisecond))
		mustAcquire(t, ctx, l)
		if got := c.PTTL(ctx, l.Key()).Val(); got <= 0 || got > 300*time.Millisecond {
			t.Fatalf("PTTL after acquire = %v, want in (0, 300ms]", got)
		}
		if err := l.Extend(ctx, 900*time.Millisecond); err != nil {
			t.Fatalf("Extend(900ms) = %v", err)
		}
		if got := c.PTTL(ctx, l.Key()).Val(); got <= 300*time.Millisecond || got > 900*time.Millisecond {
			t.Fatalf("PTTL after Extend(900ms) = %v, want in (300ms, 900ms]", got)
		}
		// Extend replaces the TTL; it does not add to it.
		if err := l.Extend(ctx, 400*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if got := c.PTTL(ctx, l.Key()).Val(); got > 400*time.Millisecond {
			t.Fatalf("PTTL after Extend(400ms) = %v, want <= 400ms", got)
		}

		// By a non-owner: refused, TTL unchanged.
		other := mustNew(t, c, "job")
		before := c.PTTL(ctx, l.Key()).Val()
		if err := other.Extend(ctx, time.Hour); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("other.Extend() = %v, want ErrNotAcquired", err)
		}
		if got := c.PTTL(ctx, l.Key()).Val(); got > before {
			t.Fatalf("PTTL after foreign extend = %v, want <= %v", got, before)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// A missing key is not recreated.
		if err := l.Extend(ctx, time.Second); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("Extend() after release = %v, want ErrNotAcquired", err)
		}
		if n := c.Exists(ctx, l.Key()).Val(); n != 0 {
			t.Fatal("Extend recreated a released key")
		}

		// A lock without expire cannot be extended.
		forever := mustNew(t, c, "forever", redislock.WithExpire(0))
		mustAcquire(t, ctx, forever)
		if err := forever.Extend(ctx, time.Second); !errors.Is(err, redislock.ErrNotExpirable) {
			t.Fatalf("Extend() without expire = %v, want ErrNotExpirable", err)
		}
		if got := c.PTTL(ctx, forever.Key()).Val(); got != -1*time.Nanosecond && got != -1*time.Millisecond {
			t.Fatalf("PTTL of lock without expire = %v, want -1 (none)", got)
		}
	})
}

func TestLockedOwnerIDAndStoredValue(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		l := mustNew(t, c, "job")
		if ok, err := l.Locked(ctx); ok || err != nil {
			t.Fatalf("Locked() on free lock = %v, %v; want false, nil", ok, err)
		}
		if id, err := l.OwnerID(ctx); id != "" || err != nil {
			t.Fatalf("OwnerID() on free lock = %q, %v; want \"\", nil", id, err)
		}
		mustAcquire(t, ctx, l)
		if ok, err := l.Locked(ctx); !ok || err != nil {
			t.Fatalf("Locked() on held lock = %v, %v; want true, nil", ok, err)
		}
		id, err := l.OwnerID(ctx)
		if err != nil || id != l.ID() {
			t.Fatalf("OwnerID() = %q, %v; want %q", id, err, l.ID())
		}
		if got := c.Get(ctx, "lock:job").Val(); got != l.ID() {
			t.Fatalf("stored value = %q, want ID() %q", got, l.ID())
		}
		if o, ok := wire.ParseOwner(l.ID()); !ok || o.PID != os.Getpid() {
			t.Fatalf("default ID() = %q: ParseOwner = %+v, %v; want this process's pid %d", l.ID(), o, ok, os.Getpid())
		}
	})
}

func TestNonUTF8OwnerValue(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		const alien = "\xff\xfe\x00id"
		c.Set(ctx, "lock:job", alien, 0)
		l := mustNew(t, c, "job")
		if id, err := l.OwnerID(ctx); err != nil || id != alien {
			t.Fatalf("OwnerID() = %q, %v; want %q", id, err, alien)
		}
		if ok, err := l.Locked(ctx); !ok || err != nil {
			t.Fatalf("Locked() = %v, %v; want true", ok, err)
		}
		if err := l.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("TryAcquire() = %v, want ErrLocked", err)
		}
		if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("Release() = %v, want ErrNotAcquired", err)
		}
		if n, err := l.Reset(ctx); n != 1 || err != nil {
			t.Fatalf("Reset() of a held lock = %d, %v; want 1 hold dropped", n, err)
		}
		if n, err := l.Reset(ctx); n != 0 || err != nil {
			t.Fatalf("Reset() of a free lock = %d, %v; want 0", n, err)
		}
		if err := l.TryAcquire(ctx); err != nil {
			t.Fatalf("TryAcquire() after reset = %v", err)
		}
	})
}

// The keys and values are python-redis-lock's, byte for byte.
func TestWireFormat(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		l := mustNew(t, c, "reports", redislock.WithExpire(5*time.Second), redislock.WithID("worker-7"),
			redislock.WithSignalExpire(1500*time.Millisecond))
		mustAcquire(t, ctx, l)
		if keys := c.Keys(ctx, "*").Val(); len(keys) != 1 || keys[0] != "lock:reports" {
			t.Fatalf("keys while held = %q, want [lock:reports]", keys)
		}
		if typ := c.Type(ctx, "lock:reports").Val(); typ != "string" {
			t.Fatalf("TYPE lock:reports = %q, want string", typ)
		}
		if got := c.Get(ctx, "lock:reports").Val(); got != "worker-7" {
			t.Fatalf("GET lock:reports = %q, want worker-7", got)
		}
		if got := c.PTTL(ctx, "lock:reports").Val(); got <= 4*time.Second || got > 5*time.Second {
			t.Fatalf("PTTL lock:reports = %v, want about 5s", got)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// python-redis-lock's release leaves the signal list; ours also
		// the turn key, for a moment, which Python ignores.
		keys := c.Keys(ctx, "*").Val()
		slices.Sort(keys)
		if len(keys) != 2 || keys[0] != "lock-signal:reports" || keys[1] != "lock-signal:reports:turn" {
			t.Fatalf("keys after release = %q, want [lock-signal:reports lock-signal:reports:turn]", keys)
		}
		if got := c.PTTL(ctx, "lock-signal:reports:turn").Val(); got <= 0 || got > 100*time.Millisecond {
			t.Fatalf("PTTL lock-signal:reports:turn = %v, want in (0, 100ms]", got)
		}
		if got := c.LRange(ctx, "lock-signal:reports", 0, -1).Val(); len(got) != 1 || got[0] != "1" {
			t.Fatalf("signal list = %q, want [1]", got)
		}
		if got := c.PTTL(ctx, "lock-signal:reports").Val(); got <= 0 || got > 1500*time.Millisecond {
			t.Fatalf("PTTL lock-signal:reports = %v, want in (0, 1.5s]", got)
		}

		// The prefix option sets the lock key exactly.
		m := mustNew(t, c, "ocr-42", redislock.WithKeyPrefix("_mayan_lock:"))
		mustAcquire(t, ctx, m)
		if got := c.Get(ctx, "_mayan_lock:ocr-42").Val(); got != m.ID() {
			t.Fatalf("GET _mayan_lock:ocr-42 = %q, want %q", got, m.ID())
		}
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := c.LLen(ctx, "_mayan_lock-signal:ocr-42").Val(); n != 1 {
			t.Fatalf("LLEN _mayan_lock-signal:ocr-42 = %d, want 1", n)
		}
	})
}

// A lock taken the way other clients take it (SET NX PX, as Mayan EDMS and
// python-redis-lock do) excludes us, and theirs excludes ours.
func TestForeignHolder(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		if ok := c.SetNX(ctx, "_mayan_lock:doc-1", "mayan-worker", time.Minute).Val(); !ok {
			t.Fatal("foreign SET NX failed")
		}
		l := mustNew(t, c, "doc-1", redislock.WithKeyPrefix("_mayan_lock:"))
		if err := l.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatalf("TryAcquire() over a foreign holder = %v, want ErrLocked", err)
		}
		c.Del(ctx, "_mayan_lock:doc-1") // the foreign compare-and-delete
		if err := l.TryAcquire(ctx); err != nil {
			t.Fatalf("TryAcquire() after foreign release = %v", err)
		}
		if ok := c.SetNX(ctx, "_mayan_lock:doc-1", "mayan-worker", time.Minute).Val(); ok {
			t.Fatal("foreign SET NX succeeded while we hold the lock")
		}
	})
}

// A release replaces a signal key or a turn key of another type, as
// python-redis-lock's unlock (DEL, then LPUSH) replaces the signal key: the
// release succeeds and leaves the signal list Python expects. (Found by
// review: with LPUSH first, Release failed with WRONGTYPE after deleting
// the lock key.)
func TestReleaseReplacesKeysOfAnotherType(t *testing.T) {
	quick(t)
	for _, key := range []string{"lock-signal:job", "lock-signal:job:turn"} {
		t.Run(key, func(t *testing.T) {
			onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
				c := b.client()
				l := mustNew(t, c, "job", redislock.WithExpire(10*time.Second))
				mustAcquire(t, ctx, l)
				if err := c.HSet(ctx, key, "f", "v").Err(); err != nil { // neither a list nor a string
					t.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatalf("Release() with %s a hash = %v, want nil", key, err)
				}
				if n := c.Exists(ctx, "lock:job").Val(); n != 0 {
					t.Fatalf("lock:job still there after the release")
				}
				if got := c.LRange(ctx, "lock-signal:job", 0, -1).Val(); len(got) != 1 || got[0] != "1" {
					t.Fatalf("signal list after the release = %q, want [1]", got)
				}
				if typ := c.Type(ctx, "lock-signal:job:turn").Val(); typ != "string" {
					t.Fatalf("turn key after the release is a %s, want the releaser's turn (a string)", typ)
				}
			})
		})
	}
}

func TestSignalListStaysSmallAndExpires(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		l := mustNew(t, c, "job", redislock.WithSignalExpire(50*time.Millisecond))
		for i := 0; i < 20; i++ {
			mustAcquire(t, ctx, l)
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if n := c.LLen(ctx, "lock-signal:job").Val(); n != 1 {
				t.Fatalf("after release %d LLEN signal = %d, want 1", i, n)
			}
		}
		// Without a waiter the signal disappears after the signal expire.
		if b.mini != nil {
			b.mini.FastForward(50 * time.Millisecond)
		}
		deadline := time.Now().Add(5 * time.Second)
		for c.Exists(ctx, "lock-signal:job").Val() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("signal list still exists 5s after its 50ms expire")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestResetAndResetAll(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		var locks []*redislock.Lock
		for _, name := range []string{"a", "b", "with space", "glob*[?]"} {
			l := mustNew(t, c, name)
			mustAcquire(t, ctx, l)
			locks = append(locks, l)
		}
		other := mustNew(t, c, "c", redislock.WithKeyPrefix("other:"))
		mustAcquire(t, ctx, other)
		c.Set(ctx, "lockx", "not a lock", 0)
		c.Set(ctx, "app:lock:a", "not a lock", 0)

		if _, err := locks[0].Reset(ctx); err != nil {
			t.Fatalf("Reset() = %v", err)
		}
		if n := c.Exists(ctx, "lock:a").Val(); n != 0 {
			t.Fatal("lock:a exists after Reset")
		}
		if err := locks[0].Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("Release() after Reset = %v, want ErrNotAcquired", err)
		}

		n, err := redislock.ResetAll(ctx, c)
		if err != nil || n != 3 {
			t.Fatalf("ResetAll() = %d, %v; want 3, nil", n, err)
		}
		for _, key := range []string{"lock:b", "lock:with space", "lock:glob*[?]"} {
			if c.Exists(ctx, key).Val() != 0 {
				t.Fatalf("%s exists after ResetAll", key)
			}
			sig := "lock-signal:" + key[len("lock:"):]
			if got := c.LRange(ctx, sig, 0, -1).Val(); len(got) != 1 || got[0] != "1" {
				t.Fatalf("%s = %q after ResetAll, want [1]", sig, got)
			}
		}
		for _, key := range []string{"other:c", "lockx", "app:lock:a"} {
			if c.Exists(ctx, key).Val() != 1 {
				t.Fatalf("ResetAll deleted %s, outside its prefix", key)
			}
		}
		// A prefix with glob characters matches itself only.
		star := mustNew(t, c, "x", redislock.WithKeyPrefix("l*:"))
		mustAcquire(t, ctx, star)
		if n, err := redislock.ResetAll(ctx, c, redislock.WithKeyPrefix("l*:")); err != nil || n != 1 {
			t.Fatalf("ResetAll(l*:) = %d, %v; want 1, nil", n, err)
		}
		if c.Exists(ctx, "other:c").Val() != 1 {
			t.Fatal("ResetAll(l*:) deleted other:c")
		}
	})
}

// A client hook that counts the commands sent, to show that refused calls
// send nothing.
type countHook struct{ n int }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n++; return next(ctx, cmd) }
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n += len(cmds); return next(ctx, cmds) }
}

func TestBadInput(t *testing.T) {
	quick(t)
	b := miniBackend(t)
	c := b.client()
	hook := &countHook{}
	c.AddHook(hook)

	tests := []struct {
		name   string
		client redis.UniversalClient
		lock   string
		opts   []redislock.Option
		want   error
	}{
		{"nil client", nil, "job", nil, redislock.ErrNilClient},
		{"empty name", c, "", nil, redislock.ErrInvalidName},
		{"negative expire", c, "job", []redislock.Option{redislock.WithExpire(-time.Second)}, redislock.ErrInvalidExpire},
		{"expire under 1ms", c, "job", []redislock.Option{redislock.WithExpire(999 * time.Microsecond)}, redislock.ErrInvalidExpire},
		{"zero signal expire", c, "job", []redislock.Option{redislock.WithSignalExpire(0)}, redislock.ErrInvalidSignalExpire},
		{"signal expire under 1ms", c, "job", []redislock.Option{redislock.WithSignalExpire(time.Microsecond)}, redislock.ErrInvalidSignalExpire},
		{"negative signal expire", c, "job", []redislock.Option{redislock.WithSignalExpire(-time.Second)}, redislock.ErrInvalidSignalExpire},
		{"empty id", c, "job", []redislock.Option{redislock.WithID("")}, redislock.ErrInvalidID},
		{"empty prefix", c, "job", []redislock.Option{redislock.WithKeyPrefix("")}, redislock.ErrInvalidPrefix},
		{"auto-renewal without expire", c, "job", []redislock.Option{redislock.WithExpire(0), redislock.WithAutoRenewal()}, redislock.ErrInvalidAutoRenewal},
		{"max hold below the default expire", c, "job", []redislock.Option{redislock.WithMaxHold(time.Second)}, redislock.ErrInvalidMaxHold},
		{"max hold without auto-renewal", c, "job", []redislock.Option{redislock.WithExpire(time.Second), redislock.WithMaxHold(time.Minute)}, redislock.ErrInvalidMaxHold},
		{"max hold below expire", c, "job", []redislock.Option{redislock.WithExpire(time.Minute), redislock.WithAutoRenewal(), redislock.WithMaxHold(time.Second)}, redislock.ErrInvalidMaxHold},
		{"negative max hold", c, "job", []redislock.Option{redislock.WithExpire(time.Second), redislock.WithAutoRenewal(), redislock.WithMaxHold(-time.Second)}, redislock.ErrInvalidMaxHold},
		{"negative safety margin", c, "job", []redislock.Option{redislock.WithExpire(time.Second), redislock.WithSafetyMargin(-time.Millisecond)}, redislock.ErrInvalidSafetyMargin},
		{"safety margin above half the expire", c, "job", []redislock.Option{redislock.WithExpire(time.Second), redislock.WithSafetyMargin(501 * time.Millisecond)}, redislock.ErrInvalidSafetyMargin},
		{"safety margin without expire", c, "job", []redislock.Option{redislock.WithExpire(0), redislock.WithSafetyMargin(time.Millisecond)}, redislock.ErrInvalidSafetyMargin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := redislock.New(tt.client, tt.lock, tt.opts...)
			if !errors.Is(err, tt.want) || !errors.Is(err, redislock.ErrInvalidArgument) {
				t.Fatalf("New() = %v, want %v (an ErrInvalidArgument)", err, tt.want)
			}
			if l != nil {
				t.Fatalf("New() returned a Lock with error %v", err)
			}
		})
	}

	ctx := ctxT(t)
	l := mustNew(t, c, "job", redislock.WithExpire(time.Second))
	for _, d := range []time.Duration{-time.Second, time.Microsecond} {
		if err := l.Extend(ctx, d); !errors.Is(err, redislock.ErrInvalidDuration) {
			t.Errorf("Extend(%v) = %v, want ErrInvalidDuration", d, err)
		}
	}
	// 0 means the Lock's own expire; without one there is nothing to use.
	if err := mustNew(t, c, "job", redislock.WithExpire(0)).Extend(ctx, 0); !errors.Is(err, redislock.ErrInvalidDuration) {
		t.Errorf("Extend(0) without expire = %v, want ErrInvalidDuration", err)
	}
	if _, err := redislock.ResetAll(ctx, nil); !errors.Is(err, redislock.ErrNilClient) {
		t.Errorf("ResetAll(nil) = %v, want ErrNilClient", err)
	}
	// The family's holds must expire: its error does not offer 0 (never).
	for _, d := range []time.Duration{0, -time.Second} {
		_, serr := redislock.NewSemaphore(c, "pool", 2, redislock.WithExpire(d))
		_, rerr := redislock.NewRWMutex(c, "cfg", redislock.WithExpire(d))
		for _, err := range []error{serr, rerr} {
			if !errors.Is(err, redislock.ErrInvalidExpire) || strings.Contains(err.Error(), "never") {
				t.Errorf("WithExpire(%v) on the family: %v; want ErrInvalidExpire, which must not offer 0 (never)", d, err)
			}
		}
	}
	// A nil pointer of a client type is nil too (it panicked).
	var nilClient *redis.Client
	var nilCluster *redis.ClusterClient
	for _, nc := range []redis.UniversalClient{nilClient, nilCluster} {
		for name, call := range map[string]func() error{
			"New":          func() error { _, err := redislock.New(nc, "job"); return err },
			"NewSemaphore": func() error { _, err := redislock.NewSemaphore(nc, "pool", 2); return err },
			"NewRWMutex":   func() error { _, err := redislock.NewRWMutex(nc, "cfg"); return err },
			"ResetAll":     func() error { _, err := redislock.ResetAll(ctx, nc); return err },
			"List":         func() error { _, err := redislock.List(ctx, nc, "*"); return err },
			"Check":        func() error { _, err := redislock.Check(ctx, nc); return err },
		} {
			if err := call(); !errors.Is(err, redislock.ErrNilClient) {
				t.Errorf("%s(%T(nil)) = %v, want ErrNilClient", name, nc, err)
			}
		}
	}
	if _, err := redislock.ResetAll(ctx, c, redislock.WithKeyPrefix("")); !errors.Is(err, redislock.ErrInvalidPrefix) {
		t.Errorf("ResetAll(prefix \"\") = %v, want ErrInvalidPrefix", err)
	}
	if hook.n != 0 {
		t.Fatalf("refused calls sent %d commands, want 0", hook.n)
	}
	if keys := b.mini.Keys(); len(keys) != 0 {
		t.Fatalf("refused calls wrote keys %q", keys)
	}

	// Acquire on a Lock that holds waits its turn locally, sending
	// nothing, until its context ends.
	mustAcquire(t, ctx, l)
	sent := hook.n
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := l.Acquire(short); !errors.Is(err, redislock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Acquire() = %v, want ErrLocked and DeadlineExceeded", err)
	}
	if hook.n != sent {
		t.Fatalf("second Acquire() sent %d commands, want 0", hook.n-sent)
	}
}

// python-redis-lock's test_release_from_nonblocking_getting_expired: a lock
// that expired cannot be released, and releasing changes nothing.
func TestReleaseAfterExpiry(t *testing.T) {
	quick(t)
	b := miniBackend(t)
	ctx := ctxT(t)
	c := b.client()
	l := mustNew(t, c, "job", redislock.WithExpire(time.Second))
	if err := l.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.mini.FastForward(time.Second)
	if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("Release() after expiry = %v, want ErrNotAcquired", err)
	}
	if keys := b.mini.Keys(); len(keys) != 0 {
		t.Fatalf("Release() after expiry left keys %q", keys)
	}
}

func TestList(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		c := b.client()
		for _, name := range []string{"report:1", "report:2", "ocr[1]"} {
			mustAcquire(t, ctx, mustNew(t, c, name, redislock.WithID("w-"+name), redislock.WithExpire(time.Minute)))
		}
		mustAcquire(t, ctx, mustNew(t, c, "forever", redislock.WithExpire(0)))
		mustAcquire(t, ctx, mustNew(t, c, "elsewhere", redislock.WithKeyPrefix("other:")))
		c.Set(ctx, "lockless", "x", 0)

		all, err := redislock.List(ctx, c, "")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, li := range all {
			names = append(names, li.Name)
		}
		if got, want := strings.Join(names, ","), "forever,ocr[1],report:1,report:2"; got != want {
			t.Fatalf("List() names = %s, want %s", got, want)
		}
		for _, li := range all {
			switch {
			case li.Key != "lock:"+li.Name:
				t.Errorf("%s: Key = %q", li.Name, li.Key)
			case li.Name == "forever" && li.TTL >= 0:
				t.Errorf("forever: TTL = %v, want negative (no expire)", li.TTL)
			case li.Name != "forever" && (li.TTL <= 50*time.Second || li.Owner != "w-"+li.Name):
				t.Errorf("%s: owner %q TTL %v", li.Name, li.Owner, li.TTL)
			}
		}
		some, err := redislock.List(ctx, c, "report:*")
		if err != nil || len(some) != 2 {
			t.Fatalf("List(report:*) = %v, %v; want 2 locks", some, err)
		}
		other, err := redislock.List(ctx, c, "*", redislock.WithKeyPrefix("other:"))
		if err != nil || len(other) != 1 || other[0].Name != "elsewhere" {
			t.Fatalf("List(other:) = %v, %v", other, err)
		}
	})
}

// A prefix that is not UTF-8 (found by FuzzKeyScheme): List and ResetAll
// still find exactly its locks.
func TestNonUTF8Prefix(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
	c := s.Client()
	prefix := "x\xdf\xdf*:"
	l := mustNew(t, c, "job", redislock.WithKeyPrefix(prefix))
	mustAcquire(t, ctx, l)
	c.Set(ctx, "x\xdf\xdfyy:job", "not a lock", 0) // would match if '*' were not escaped
	infos, err := redislock.List(ctx, c, "*", redislock.WithKeyPrefix(prefix))
	if err != nil || len(infos) != 1 || infos[0].Key != prefix+"job" {
		t.Fatalf("List() = %+v, %v; want the one lock", infos, err)
	}
	if n, err := redislock.ResetAll(ctx, c, redislock.WithKeyPrefix(prefix)); err != nil || n != 1 {
		t.Fatalf("ResetAll() = %d, %v; want 1", n, err)
	}
	if c.Exists(ctx, "x\xdf\xdfyy:job").Val() != 1 {
		t.Fatal("ResetAll deleted a key outside its prefix")
	}
}

// Status of a Lock: no holder while it is free; its owner, for how
// long, as List describes it, while held.
func TestLockStatus(t *testing.T) {
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		l := mustNew(t, b.client(), "job", redislock.WithExpire(time.Minute))
		if st, err := l.Status(ctx); err != nil || len(st.Holders) != 0 {
			t.Fatalf("Status() of a free lock = %+v, %v; want no holder", st, err)
		}
		mustAcquire(t, ctx, l)
		st, err := l.Status(ctx)
		if err != nil || len(st.Holders) != 1 {
			t.Fatalf("Status() of a held lock = %+v, %v; want one holder", st, err)
		}
		if h := st.Holders[0]; h.Owner != l.ID() || h.TTL <= 50*time.Second || h.Name != "job" || h.Key != "lock:job" || h.Kind != redislock.KindLock {
			t.Fatalf("Status() of a held lock: holder %+v; want this Lock's id, about a minute, lock:job", h)
		}
	})
}

// An option a call does nothing with is refused, before anything is sent:
// accepted and ignored, it would look as if it had worked. The same
// options pass where they apply.
func TestOptionsACallIgnoresAreRefused(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	b := miniBackend(t)
	c := b.client()
	hook := &countHook{}
	c.AddHook(hook)
	refused := map[string]func() error{
		"NewSemaphore WithHashTag": func() error {
			_, err := redislock.NewSemaphore(c, "pool", 2, redislock.WithHashTag(false))
			return err
		},
		"NewSemaphore WithTracking": func() error {
			_, err := redislock.NewSemaphore(c, "pool", 2, redislock.WithTracking(false))
			return err
		},
		"NewRWMutex WithHashTag": func() error {
			_, err := redislock.NewRWMutex(c, "cfg", redislock.WithHashTag(true))
			return err
		},
		"ResetAll WithExpire": func() error {
			_, err := redislock.ResetAll(ctx, c, redislock.WithExpire(time.Second))
			return err
		},
		"ResetAll WithID": func() error {
			_, err := redislock.ResetAll(ctx, c, redislock.WithKeyPrefix("p:"), redislock.WithID("w1"))
			return err
		},
		"List WithSignalExpire": func() error {
			_, err := redislock.List(ctx, c, "*", redislock.WithSignalExpire(time.Second))
			return err
		},
		"Check WithID": func() error {
			_, err := redislock.Check(ctx, c, redislock.WithID("w1"))
			return err
		},
		"Check WithFencing": func() error {
			_, err := redislock.Check(ctx, c, redislock.WithTracking(false), redislock.WithFencing())
			return err
		},
	}
	for name, call := range refused {
		err := call()
		if !errors.Is(err, redislock.ErrInvalidArgument) || !strings.Contains(err.Error(), "does nothing in") {
			t.Errorf("%s = %v, want an ErrInvalidArgument naming the option", name, err)
		}
	}
	if n := hook.n; n != 0 {
		t.Fatalf("%d commands sent by calls with refused options, want 0", n)
	}
	// Where they apply, the same options pass.
	if _, err := redislock.NewRWMutex(c, "cfg", redislock.WithTracking(false)); err != nil {
		t.Fatalf("NewRWMutex(WithTracking) = %v", err)
	}
	if _, err := redislock.NewSemaphore(c, "pool", 2, redislock.WithID("w1"), redislock.WithFencing()); err != nil {
		t.Fatalf("NewSemaphore(WithID, WithFencing) = %v", err)
	}
	if _, err := redislock.ResetAll(ctx, c, redislock.WithKeyPrefix("p:"), redislock.WithSignalExpire(time.Second), redislock.WithHashTag(false)); err != nil {
		t.Fatalf("ResetAll(WithKeyPrefix, WithSignalExpire, WithHashTag) = %v", err)
	}
	if _, err := redislock.List(ctx, c, "*", redislock.WithKeyPrefix("p:"), redislock.WithHashTag(false)); err != nil {
		t.Fatalf("List(WithKeyPrefix, WithHashTag) = %v", err)
	}
	if _, err := redislock.Check(ctx, c, redislock.WithTracking(false)); err != nil {
		t.Fatalf("Check(WithTracking) = %v", err)
	}
}

// A Lock, Semaphore or RWMutex made with no options expires after
// DefaultExpire (30 s) and is renewed while held (a dead holder frees it,
// a long job keeps it); WithExpire(d) alone expires without renewal, as
// python-redis-lock's expire=d; WithExpire(0) never expires, as its
// default.
func TestDefaultsExpireAndRenew(t *testing.T) {
	b := realBackend(t)
	ctx := ctxT(t)
	c := b.client()
	pttl := func(key string) time.Duration { return c.PTTL(ctx, key).Val() }

	plain := mustNew(t, c, "plain")
	mustAcquire(t, ctx, plain)
	if got := pttl(plain.Key()); got <= redislock.DefaultExpire-5*time.Second || got > redislock.DefaultExpire {
		t.Fatalf("a default Lock's key PTTL = %v, want about %v", got, redislock.DefaultExpire)
	}
	never := mustNew(t, c, "never", redislock.WithExpire(0))
	mustAcquire(t, ctx, never)
	if got := pttl(never.Key()); got != -time.Millisecond && got != -time.Nanosecond {
		t.Fatalf("WithExpire(0): PTTL = %v, want none", got)
	}

	// Renewal runs for the defaults, not for an explicit expire alone.
	renews := func(name string, acquire func(opts ...redislock.Option) error, opts ...redislock.Option) bool {
		t.Helper()
		logs := &logRecorder{level: slog.LevelDebug}
		if err := acquire(append(opts, redislock.WithLogger(slog.New(logs)))...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return len(logs.lines("redis_lock.refresh.start")) > 0
	}
	lock := func(name string) func(...redislock.Option) error {
		return func(opts ...redislock.Option) error { return mustNew(t, c, name, opts...).Acquire(ctx) }
	}
	for _, tc := range []struct {
		name    string
		acquire func(...redislock.Option) error
		opts    []redislock.Option
		want    bool
	}{
		{"Lock, no options", lock("l1"), nil, true},
		{"Lock, WithExpire(10s)", lock("l2"), []redislock.Option{redislock.WithExpire(10 * time.Second)}, false},
		{"Lock, WithExpire(10s), WithAutoRenewal", lock("l3"), []redislock.Option{redislock.WithExpire(10 * time.Second), redislock.WithAutoRenewal()}, true},
		{"Lock, WithExpire(0)", lock("l4"), []redislock.Option{redislock.WithExpire(0)}, false},
		{"Semaphore, no options", func(opts ...redislock.Option) error {
			p, err := mustSemaphore(t, c, "s1", 2, opts...).Acquire(ctx)
			if err == nil {
				t.Cleanup(func() { p.Release(context.Background()) })
			}
			return err
		}, nil, true},
		{"RWMutex writer, no options", func(opts ...redislock.Option) error {
			return mustRWMutex(t, c, "rw1", opts...).Lock(ctx)
		}, nil, true},
		{"RWMutex reader, no options", func(opts ...redislock.Option) error {
			return mustRWMutex(t, c, "rw2", opts...).RLock(ctx)
		}, nil, true},
	} {
		if got := renews(tc.name, tc.acquire, tc.opts...); got != tc.want {
			t.Errorf("%s: renewal started %v, want %v", tc.name, got, tc.want)
		}
	}
}
