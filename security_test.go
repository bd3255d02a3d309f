package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
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
	quick(t)
	long(t, "fills the server's memory")
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
			var (
				writeErr error
				writes   int
			)
			// Write until the lock key is evicted or a write is refused.
			// About 60 keys fit, and keys written within one second tie
			// on LRU idle time (Redis counts it in seconds), so each
			// eviction takes the lock key only by chance: in 60 runs it
			// went after 38 to 172 writes, and a cap of 200 left it in
			// place about once in a hundred runs. 5000 writes (320 MB
			// through a 4 MB server, a second or two) make that
			// vanishingly rare.
			for ; writes < 5000 && c.Exists(ctx, l.Key()).Val() == 1; writes++ {
				if writeErr = c.Set(ctx, fmt.Sprintf("cache:%d", writes), value, time.Hour).Err(); writeErr != nil {
					break
				}
			}
			evicted := c.Exists(ctx, l.Key()).Val() == 0
			t.Logf("%s: lock key evicted = %v after %d writes of 64 KiB (last write: %v)", tc.policy, evicted, writes, writeErr)
			if evicted != tc.wantEvicted {
				t.Fatalf("%s: lock key evicted = %v, want %v", tc.policy, evicted, tc.wantEvicted)
			}
			if !tc.wantEvicted && (writeErr == nil || !strings.Contains(writeErr.Error(), "OOM")) {
				t.Fatalf("noeviction: filler writes = %v, want an OOM error", writeErr)
			}
			// The holder is told of an eviction at once: its key is watched
			// (it has an hour's expire and no renewal, so nothing else
			// would end the hold).
			select {
			case <-l.Done():
				if !tc.wantEvicted || !errors.Is(l.Err(), redislock.ErrExpired) {
					t.Fatalf("%s: Done closed, Err() = %v", tc.policy, l.Err())
				}
			case <-time.After(time.Second):
				if tc.wantEvicted {
					t.Fatalf("%s: the holder was not told of the eviction within 1s", tc.policy)
				}
			}
			if r, _ := redislock.Check(ctx, c); r.OK() == tc.wantEvicted {
				t.Fatalf("Check() under %s = %v", tc.policy, r)
			}
		})
	}
}

// workerIDs runs a worker process that prints the ids of n new Locks.
func workerIDs(t *testing.T, n int, env ...string) []string {
	t.Helper()
	cmd := worker(t, "ids", append([]string{"W_COUNT=" + strconv.Itoa(n)}, env...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ids worker: %v", err)
	}
	return strings.Fields(string(out))
}

// Owner ids end in random UUIDv4s (122 random bits, crypto/rand in
// google/uuid), different for every Lock: 10,000 in this process, and
// 1,000 in each of two fresh processes, all distinct. A generator with a
// fixed seed gives fresh processes the same ids, as the broken variant
// (math/rand seeded with 1) shows: the same check catches it. (A PRNG
// seeded from the clock would pass; no black-box test can tell it from
// crypto/rand.)
func TestRandomIDs(t *testing.T) {
	quick(t)
	// "<host>:<pid>:<uuid>": the random part is the UUIDv4 at the end.
	v4 := regexp.MustCompile(`^[A-Za-z0-9._-]+:[1-9][0-9]*:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	distinct := func(ids []string) (bool, string) {
		seen := map[string]bool{} // the random parts: each must be unique on its own
		for _, id := range ids {
			if !v4.MatchString(id) || seen[id[len(id)-36:]] {
				return false, id
			}
			seen[id[len(id)-36:]] = true
		}
		return true, ""
	}

	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	var ids []string
	for i := 0; i < 10000; i++ {
		l, err := redislock.New(c, "job")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID())
	}
	if ok, id := distinct(ids); !ok {
		t.Fatalf("ID() = %q: not a fresh UUIDv4", id)
	}

	for _, tc := range []struct {
		name   string
		env    []string
		broken bool
	}{
		{"two processes", nil, false},
		{"broken/two processes, seeded math/rand", []string{"W_SEEDED=1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := workerIDs(t, 1000, tc.env...), workerIDs(t, 1000, tc.env...)
			if len(a) != 1000 || len(b) != 1000 {
				t.Fatalf("workers printed %d and %d ids, want 1000 each", len(a), len(b))
			}
			ok, id := distinct(append(append(append([]string{}, ids...), a...), b...))
			if ok == tc.broken {
				t.Fatalf("ids of two fresh processes distinct (and UUIDv4s) = %v (first bad: %q), want %v", ok, id, !tc.broken)
			}
		})
	}
}

// keyState is what a non-owner must not change: the lock key's value and
// TTL, and the fence. sent and got bracket the reads.
type keyState struct {
	value, fence string
	pttl         time.Duration
	sent, got    time.Time
}

func readKeyState(ctx context.Context, t *testing.T, c *redis.Client) keyState {
	t.Helper()
	st := keyState{sent: time.Now()}
	var get, fence *redis.StringCmd
	var pttl *redis.DurationCmd
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		get, pttl, fence = p.Get(ctx, "lock:job"), p.PTTL(ctx, "lock:job"), p.Get(ctx, "lock-fence:job")
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	st.got = time.Now()
	st.value, st.pttl, st.fence = get.Val(), pttl.Val(), fence.Val()
	return st
}

// changedSince says how the key changed from a to b, "" if it did not: the
// value and fence must be equal, and the TTL may only have run down by the
// time that passed between the reads (PTTL is whole milliseconds).
func (b keyState) changedSince(a keyState) string {
	switch {
	case b.value != a.value:
		return fmt.Sprintf("value %q -> %q", a.value, b.value)
	case b.fence != a.fence:
		return fmt.Sprintf("fence %q -> %q", a.fence, b.fence)
	case b.pttl > a.pttl:
		return fmt.Sprintf("PTTL went up: %v -> %v", a.pttl, b.pttl)
	case b.pttl < a.pttl-b.got.Sub(a.sent)-time.Millisecond:
		return fmt.Sprintf("PTTL cut: %v -> %v in %v", a.pttl, b.pttl, b.got.Sub(a.sent))
	}
	return ""
}

// No call of a Lock that does not hold the lock changes the holder's key
// (its value and TTL) or the fence, except the explicit Reset: not even
// the giveback of its acquire whose reply was lost. The owner's key gets
// an odd TTL (45,678 ms) that no call would set, and the check allows it
// only to run down with the clock. The broken variants, a release and an
// extend without the id check, are caught by the same check.
func TestOnlyTheOwnerChangesTheKey(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	hook := newScriptHook(false)
	c := s.Client()
	c.AddHook(hook)
	other := mustNew(t, c, "job", redislock.WithExpire(time.Minute), redislock.WithAutoRenewal(), redislock.WithFencing())
	short := func() context.Context {
		sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		t.Cleanup(cancel)
		return sctx
	}
	for _, call := range []struct {
		name   string
		fn     func(t *testing.T) error
		broken bool
	}{
		{"TryAcquire", func(*testing.T) error { return other.TryAcquire(ctx) }, false},
		{"TryAcquire whose reply is lost, and its giveback", func(t *testing.T) error {
			hook.loseAcquire.Store(true)
			err := other.TryAcquire(ctx)
			waitSignal(t, hook.ran, "the giveback")
			return err
		}, false},
		{"Acquire until its deadline", func(*testing.T) error { return other.Acquire(short()) }, false},
		{"Release", func(*testing.T) error { return other.Release(ctx) }, false},
		{"Extend", func(*testing.T) error { return other.Extend(ctx, time.Hour) }, false},
		{"Locked", func(*testing.T) error { _, err := other.Locked(ctx); return err }, false},
		{"OwnerID", func(*testing.T) error { _, err := other.OwnerID(ctx); return err }, false},
		{"Status", func(*testing.T) error { _, err := other.Status(ctx); return err }, false},
		{"Guard", func(*testing.T) error {
			return other.Guard(ctx, func(p redis.Pipeliner) error { return p.Del(ctx, "lock:job").Err() })
		}, false},
		{"TryDo", func(*testing.T) error { return other.TryDo(ctx, func(context.Context) error { return nil }) }, false},
		{"Do until its deadline", func(*testing.T) error { return other.Do(short(), func(context.Context) error { return nil }) }, false},
		{"List", func(*testing.T) error { _, err := redislock.List(ctx, admin, "*"); return err }, false},
		{"Check", func(*testing.T) error { _, err := redislock.Check(ctx, admin); return err }, false},
		{"broken/release without id check", func(*testing.T) error { return admin.Del(ctx, "lock:job").Err() }, true},
		{"broken/extend without id check", func(*testing.T) error { return admin.PExpire(ctx, "lock:job", time.Hour).Err() }, true},
	} {
		t.Run(call.name, func(t *testing.T) {
			owner := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute), redislock.WithFencing())
			mustAcquire(t, ctx, owner)
			defer admin.Del(ctx, "lock:job")
			if err := admin.PExpire(ctx, "lock:job", 45678*time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
			before := readKeyState(ctx, t, admin)
			err := call.fn(t)
			change := readKeyState(ctx, t, admin).changedSince(before)
			if changed := change != ""; changed != call.broken {
				t.Fatalf("%s by a non-owner (%v): changed the key = %v (%s), want %v", call.name, err, changed, change, call.broken)
			}
		})
	}
	owner := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute))
	mustAcquire(t, ctx, owner)
	if _, err := other.Reset(ctx); err != nil || admin.Exists(ctx, "lock:job").Val() != 0 {
		t.Fatalf("Reset() = %v: the explicit reset must free the lock", err)
	}
}

// Names full of Lua and glob metacharacters are only ever KEYS and ARGV:
// they lock what they name and nothing else, and ResetAll with such a
// prefix matches it literally.
func TestHostileNames(t *testing.T) {
	quick(t)
	s, ctx, _ := started(t)
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
		if _, err := l.Reset(ctx); err != nil {
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
const aclLine = "ACL SETUSER locker on >secret resetkeys ~lock:* ~lock-signal:* ~lock-fence:* resetchannels &__redis__:invalidate -@all " +
	"+evalsha +eval +script|load +blpop +get +set +del +exists +lpush +pexpire +pttl +time +scan +ping +watch +multi +exec " +
	"+hello +client|id +client|setname +client|list +client|tracking +subscribe"

// trackingReader matches, in CLIENT LIST, a connection of the user locker
// with tracking on, redirected to another connection.
var trackingReader = regexp.MustCompile(`user=locker redir=[0-9]`)

// A user limited to the lock's keys and commands can do everything.
func TestACLUser(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
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
	// The key is watched: a loss would be noticed at once. The tracker
	// sets up in the background (its subscriber is named
	// redislock-tracker-*); a refusal would have unwatched the hold.
	for deadline := time.Now().Add(5 * time.Second); !trackingReader.MatchString(admin.ClientList(ctx).Val()); {
		if time.Now().After(deadline) {
			t.Fatalf("no tracking reader of the ACL user after 5 s: %s", admin.ClientList(ctx).Val())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !redislock.Watched(holder) {
		t.Fatal("the ACL user's hold is not watched: tracking was refused")
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
