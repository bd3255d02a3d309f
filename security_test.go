package redislock_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// Under maxmemory with a volatile-* policy Redis evicts a lock key (it has
// a TTL) to make room: the lock is gone while its holder believes it holds
// it. Under noeviction the writes that need room fail instead, and the lock
// stays. Hence noeviction is a requirement (README, Check).
func TestEviction(t *testing.T) {
	for _, tc := range []struct {
		policy      string
		wantEvicted bool
	}{
		{"volatile-lru", true},
		{"noeviction", false},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			s := redistest.Start(t, "maxmemory 4mb", "maxmemory-policy "+tc.policy)
			ctx := ctxT(t)
			c := s.Client()
			l := mustNew(t, c, "job", redislock.WithExpire(time.Hour))
			mustAcquire(t, ctx, l)
			value := strings.Repeat("x", 64<<10)
			var writeErr error
			for i := 0; i < 200 && c.Exists(ctx, l.Key()).Val() == 1; i++ {
				if writeErr = c.Set(ctx, fmt.Sprintf("cache:%d", i), value, time.Hour).Err(); writeErr != nil {
					break
				}
			}
			evicted := c.Exists(ctx, l.Key()).Val() == 0
			t.Logf("%s: lock key evicted = %v (last write: %v)", tc.policy, evicted, writeErr)
			if evicted != tc.wantEvicted {
				t.Fatalf("%s: lock key evicted = %v, want %v", tc.policy, evicted, tc.wantEvicted)
			}
			if !tc.wantEvicted && (writeErr == nil || !strings.Contains(writeErr.Error(), "OOM")) {
				t.Fatalf("noeviction: filler writes = %v, want an OOM error", writeErr)
			}
			if r, _ := redislock.Check(ctx, c); r.OK() == tc.wantEvicted {
				t.Fatalf("Check() under %s = %v", tc.policy, r)
			}
		})
	}
}

// Owner ids are random UUIDv4s (122 random bits, crypto/rand in
// google/uuid), different for every Lock.
func TestRandomIDs(t *testing.T) {
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		l, err := redislock.New(c, "job")
		if err != nil {
			t.Fatal(err)
		}
		if !v4.MatchString(l.ID()) || seen[l.ID()] {
			t.Fatalf("ID() = %q: not a fresh UUIDv4", l.ID())
		}
		seen[l.ID()] = true
	}
}

// No call of a Lock that does not hold the lock changes the holder's key,
// except the explicit Reset.
func TestOnlyTheOwnerChangesTheKey(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	admin := s.Client()
	owner := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute), redislock.WithFencing())
	mustAcquire(t, ctx, owner)
	snapshot := func() string {
		return fmt.Sprintf("%s/%d", admin.Get(ctx, "lock:job").Val(), admin.PTTL(ctx, "lock:job").Val()/time.Second)
	}
	before := snapshot()
	other := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute), redislock.WithAutoRenewal(), redislock.WithFencing())
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	calls := map[string]func() error{
		"TryAcquire": func() error { return other.TryAcquire(ctx) },
		"Acquire":    func() error { return other.Acquire(short) },
		"Release":    func() error { return other.Release(ctx) },
		"Extend":     func() error { return other.Extend(ctx, time.Hour) },
		"Locked":     func() error { _, err := other.Locked(ctx); return err },
		"OwnerID":    func() error { _, err := other.OwnerID(ctx); return err },
		"Guard": func() error {
			return other.Guard(ctx, func(p redis.Pipeliner) error { return p.Del(ctx, "lock:job").Err() })
		},
		"TryDo": func() error { return other.TryDo(ctx, func(context.Context) error { return nil }) },
		"List":  func() error { _, err := redislock.List(ctx, admin, "*"); return err },
		"Check": func() error { _, err := redislock.Check(ctx, admin); return err },
	}
	for name, call := range calls {
		err := call()
		if after := snapshot(); after != before {
			t.Fatalf("%s by a non-owner (%v) changed the key: %s -> %s", name, err, before, after)
		}
	}
	if err := other.Reset(ctx); err != nil || admin.Exists(ctx, "lock:job").Val() != 0 {
		t.Fatalf("Reset() = %v: the explicit reset must free the lock", err)
	}
}

// Names full of Lua and glob metacharacters are only ever KEYS and ARGV:
// they lock what they name and nothing else, and ResetAll with such a
// prefix matches it literally.
func TestHostileNames(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	c := s.Client()
	names := []string{`'`, `"`, `]]`, `*`, `?`, `[`, "a\nb", "nul\x00byte", `"]]) redis.call('FLUSHALL') --`, `\`, "[a-z]*"}
	c.Set(ctx, "lock:a", "bystander", 0)
	c.Set(ctx, "lock:zzz", "bystander", 0)
	for _, name := range names {
		l := mustNew(t, c, name, redislock.WithExpire(time.Minute), redislock.WithFencing())
		if err := l.Acquire(ctx); err != nil {
			t.Fatalf("Acquire(%q) = %v", name, err)
		}
		if got := c.Get(ctx, "lock:"+name).Val(); got != l.ID() {
			t.Fatalf("lock:%q = %q, want the owner id", name, got)
		}
		if err := l.Extend(ctx, 2*time.Minute); err != nil {
			t.Fatalf("Extend(%q) = %v", name, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release(%q) = %v", name, err)
		}
		if err := l.Reset(ctx); err != nil {
			t.Fatalf("Reset(%q) = %v", name, err)
		}
	}
	for _, key := range []string{"lock:a", "lock:zzz"} {
		if c.Get(ctx, key).Val() != "bystander" {
			t.Fatalf("%s was touched by locks with other names", key)
		}
	}
	// A prefix of glob characters matches itself only.
	hostile := mustNew(t, c, "x", redislock.WithKeyPrefix("[a-z]*?:"))
	mustAcquire(t, ctx, hostile)
	c.Set(ctx, "lx:x", "bystander", 0) // what the unescaped glob would match
	if n, err := redislock.ResetAll(ctx, c, redislock.WithKeyPrefix("[a-z]*?:")); err != nil || n != 1 {
		t.Fatalf("ResetAll([a-z]*?:) = %d, %v; want 1", n, err)
	}
	if c.Get(ctx, "lx:x").Val() != "bystander" || c.Get(ctx, "lock:a").Val() != "bystander" {
		t.Fatal("ResetAll with a glob prefix touched other keys")
	}
}

// aclLine is the ACL the README gives for a user of the lock: its keys,
// the commands it sends, and those its scripts run.
const aclLine = "ACL SETUSER locker on >secret resetkeys ~lock:* ~lock-signal:* ~lock-fence:* resetchannels -@all " +
	"+evalsha +eval +script|load +blpop +get +set +del +exists +lpush +pexpire +pttl +time +scan +ping +watch +multi +exec"

// A user limited to the lock's keys and commands can do everything.
func TestACLUser(t *testing.T) {
	s := redistest.Start(t)
	ctx := ctxT(t)
	admin := s.Client()
	if err := admin.Do(ctx, toArgs(strings.Fields(aclLine))...).Err(); err != nil {
		t.Fatalf("%s: %v", aclLine, err)
	}
	user := func() *redis.Client {
		return s.Client(func(o *redis.Options) { o.Username, o.Password = "locker", "secret" })
	}
	holder := mustNew(t, user(), "job", redislock.WithExpire(time.Minute), redislock.WithFencing(), redislock.WithAutoRenewal())
	if err := holder.Acquire(ctx); err != nil {
		t.Fatalf("Acquire() as the ACL user = %v", err)
	}
	waiter := mustNew(t, user(), "job")
	done := acquireAsync(ctx, waiter)
	waitBlocked(t, admin, 1)
	if err := holder.Extend(ctx, 2*time.Minute); err != nil {
		t.Fatalf("Extend() = %v", err)
	}
	if err := holder.Guard(ctx, func(p redis.Pipeliner) error { return p.Exists(ctx, "lock:job").Err() }); err != nil {
		t.Fatalf("Guard() = %v", err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release() = %v", err)
	}
	if r := receive(t, done); r.err != nil {
		t.Fatalf("waiter as the ACL user: %v", r.err)
	}
	if _, err := redislock.List(ctx, user(), "*"); err != nil {
		t.Fatalf("List() = %v", err)
	}
	if _, err := redislock.ResetAll(ctx, user()); err != nil {
		t.Fatalf("ResetAll() = %v", err)
	}
	// And nothing else: the user cannot read other keys.
	if err := user().Get(ctx, "secret:data").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("GET outside the lock keys = %v, want NOPERM", err)
	}
}

func toArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
