package redislock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// luaScripts maps the SHA1 and the source of each internal/wire/lua/*.lua file to its
// name ("acquire", "giveback", ...): what the library embeds, read back
// from the same files.
var luaScripts = sync.OnceValues(func() (map[string]string, error) {
	files, err := filepath.Glob("internal/wire/lua/*.lua")
	if err != nil || len(files) == 0 {
		return nil, errors.Join(err, errors.New("no internal/wire/lua/*.lua"))
	}
	m := map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(f), ".lua")
		sum := sha1.Sum(src)
		m[hex.EncodeToString(sum[:])] = name
		m[string(src)] = name
	}
	return m, nil
})

// scriptOf returns the name of the library script that cmd runs (by
// EVALSHA or EVAL), "" for any other command.
func scriptOf(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	switch strings.ToLower(cmd.Name()) {
	case "evalsha", "eval", "evalsha_ro", "eval_ro":
	default:
		return ""
	}
	body, _ := args[1].(string)
	scripts, err := luaScripts()
	if err != nil {
		panic(err)
	}
	return scripts[body]
}

// cacheScripts loads the library's scripts into c's server, as an earlier
// acquire would have: an EVALSHA that follows runs its script instead of
// getting NOSCRIPT.
func cacheScripts(t testing.TB, c *redis.Client) {
	t.Helper()
	files, _ := filepath.Glob("internal/wire/lua/*.lua")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ScriptLoad(context.Background(), string(src)).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD %s: %v", f, err)
		}
	}
	// The family's scripts are their files with a library before them.
	for _, sc := range []*redis.Script{wire.SemAcquire, wire.SemRelease, wire.SemExtend, wire.SemGiveback, wire.SemReset, wire.SemHolders,
		wire.RWWAcquire, wire.RWRAcquire, wire.RWWRelease, wire.RWRRelease, wire.RWWGiveback, wire.RWRGiveback, wire.RWWLeave, wire.RWRLeave, wire.RWReset, wire.RWInfo} {
		if err := sc.Load(context.Background(), c).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
	}
}

// scriptHook intercepts the library's scripts on one client. It can lose
// the reply of the next acquire after Redis ran it (as a connection reset
// after the request was sent would), and hold giveback scripts back until
// the test lets them go.
type scriptHook struct {
	loseAcquire atomic.Bool // the next acquire's reply is replaced by errInjected

	// gate, when not nil, holds every giveback until it is closed.
	gate    chan struct{}
	arrived chan struct{} // receives when a giveback reaches the gate
	ran     chan struct{} // receives when a giveback has run

	acquires atomic.Int32 // acquire scripts sent
}

func newScriptHook(gated bool) *scriptHook {
	h := &scriptHook{arrived: make(chan struct{}, 16), ran: make(chan struct{}, 16)}
	if gated {
		h.gate = make(chan struct{})
	}
	return h
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch scriptOf(cmd) {
		case "acquire":
			h.acquires.Add(1)
			err := next(ctx, cmd)
			if err == nil && h.loseAcquire.CompareAndSwap(true, false) {
				cmd.SetErr(errInjected)
				return errInjected
			}
			return err
		case "giveback":
			if h.gate != nil {
				h.arrived <- struct{}{}
				select {
				case <-h.gate:
				case <-ctx.Done():
				}
			}
			err := next(ctx, cmd)
			if !isNoScriptErr(err) { // Script.Run follows NOSCRIPT with EVAL
				h.ran <- struct{}{}
			}
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if scriptOf(cmd) == "acquire" {
				h.acquires.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

func isNoScriptErr(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// waitSignal waits for a receive on ch, failing t after 10 s.
func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10s", what)
	}
}

// loseNextAcquire returns a Lock on a hooked client of s whose next
// TryAcquire runs in Redis and then loses its reply: TryAcquire returns the
// injected error and the Lock gives the attempt back. With gated, the
// giveback waits at the hook's gate.
func loseNextAcquire(t *testing.T, ctx context.Context, s *redistest.Server, gated bool) (*redislock.Lock, *scriptHook) {
	t.Helper()
	hook := newScriptHook(gated)
	c := s.Client()
	c.AddHook(hook)
	l := mustNew(t, c, "job", redislock.WithExpire(time.Minute))
	hook.loseAcquire.Store(true)
	if err := l.TryAcquire(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("TryAcquire() with its reply lost = %v, want the injected fault", err)
	}
	if hook.loseAcquire.Load() {
		t.Fatal("the acquire script never ran")
	}
	return l, hook
}

// An attempt whose reply was lost while another owner held the lock is
// given back without touching that owner's key: the giveback deletes
// nothing but our own id.
func TestGivebackSparesAnotherOwnersLock(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	owner := mustNew(t, s.Client(), "job", redislock.WithExpire(time.Minute))
	mustAcquire(t, ctx, owner)
	_, hook := loseNextAcquire(t, ctx, s, false)
	waitSignal(t, hook.ran, "the giveback")
	if got := admin.Get(ctx, "lock:job").Val(); got != owner.ID() {
		t.Fatalf("lock:job = %q after another Lock's giveback, want the owner's id %q", got, owner.ID())
	}
	if ttl := admin.PTTL(ctx, "lock:job").Val(); ttl < 50*time.Second {
		t.Fatalf("owner's PTTL = %v after another Lock's giveback, want its minute", ttl)
	}
	if err := owner.Release(ctx); err != nil {
		t.Fatalf("owner.Release() = %v", err)
	}
}

// givebackPending is how long the tests below give a call to return while a
// giveback is held at the gate. The real code never returns then; a call
// that does not wait returns in a millisecond or two.
const givebackPending = 300 * time.Millisecond

// The lost attempt took the lock (it was free), so its giveback will
// delete our id. An Acquire made meanwhile waits for the giveback, or the
// giveback would delete the new hold's key.
func TestAcquireWaitsForPendingGiveback(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	l, hook := loseNextAcquire(t, ctx, s, true)
	waitSignal(t, hook.arrived, "the giveback")
	if got := admin.Get(ctx, "lock:job").Val(); got != l.ID() {
		t.Fatalf("lock:job = %q after the lost attempt, want our id: it ran", got)
	}
	done := acquireAsync(ctx, l)
	select {
	case r := <-done:
		close(hook.gate)
		t.Fatalf("Acquire() = %v while the lost attempt's giveback was pending, want it to wait for it", r.err)
	case <-time.After(givebackPending):
	}
	close(hook.gate)
	waitSignal(t, hook.ran, "the giveback")
	if r := receive(t, done); r.err != nil {
		t.Fatalf("Acquire() after the giveback = %v", r.err)
	}
	if got := admin.Get(ctx, "lock:job").Val(); got != l.ID() {
		t.Fatalf("lock:job = %q after Acquire, want our id: the earlier giveback deleted the new hold", got)
	}
	select {
	case <-l.Done():
		t.Fatalf("Done() closed right after Acquire: %v", l.Err())
	default:
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() = %v", err)
	}
}

// A Release made while a giveback is pending waits for it: it then finds
// the key given back and says so, instead of deleting it under the
// giveback.
func TestReleaseWaitsForPendingGiveback(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	l, hook := loseNextAcquire(t, ctx, s, true)
	waitSignal(t, hook.arrived, "the giveback")
	res := make(chan error, 1)
	go func() { res <- l.Release(ctx) }()
	select {
	case err := <-res:
		close(hook.gate)
		t.Fatalf("Release() = %v while the lost attempt's giveback was pending, want it to wait for it", err)
	case <-time.After(givebackPending):
	}
	close(hook.gate)
	waitSignal(t, hook.ran, "the giveback")
	select {
	case err := <-res:
		if !errors.Is(err, redislock.ErrNotAcquired) {
			t.Fatalf("Release() after the giveback = %v, want ErrNotAcquired: the giveback had undone the attempt", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Release() did not return within 10s of the giveback")
	}
	if n := admin.Exists(ctx, "lock:job").Val(); n != 0 {
		t.Fatal("the lost attempt's lock is still there")
	}
}
