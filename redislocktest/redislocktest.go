// Package redislocktest helps users test their own code against what
// happens to a lock in production: loss, expiry, another owner, an
// outage. It gives a Redis for one test, in-process (NewMini, miniredis)
// or a real redis-server on a free loopback port (NewReal), and acts on
// the locks of that server as an operator or an outage would: ForceLoss,
// Steal, FastForward, Outage; ForceLoss also takes a Permit (a
// Semaphore's, or an RWMutex's read permit) and an RWMutex's write hold,
// and StealPermit steals a Semaphore's permit.
//
// The locks under test are real redislock Locks talking to a real Redis
// protocol: what the test shows is what production does, which a mock of
// an interface cannot promise. See the README's "Testing code that uses
// the lock".
//
// # Time
//
// A hold has a local validity deadline on the process's monotonic clock
// (see redislock.Lock.Done): it ends, and Done closes, when the expire
// less the safety margin has run out since the acquire or the last
// renewal, whatever the server's clock says. FastForward moves the
// in-process server's clock, which expires keys at once; the holder then
// learns of it at its next renewal (auto-renewal runs every two thirds of
// the expire), or at its local deadline, in real time. So keep such tests
// fast with short expires rather than by moving clocks: a 300 ms expire
// renews about every 200 ms. A renewal has a third of the expire to come
// back; on a loaded CI machine a 50 ms expire's 17 ms is sometimes too
// little, and the hold then ends as unreachable instead of as the test
// meant. A test that checks the loss's reason is safest with about a
// second. The library has no option to inject a clock: a deadline
// that a test can move is one production could get wrong, and short
// expires give the same coverage in milliseconds.
package redislocktest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/internal/redistest"
)

// Server is a Redis for one test, stopped when the test ends. It belongs
// to that test: its helpers fail it (not a subtest that calls them: a
// helper failing from a subtest of it panics), and an Outage started from
// a subtest lasts past the subtest's end. Give each test or subtest that
// needs one a Server of its own; they start in milliseconds. Release
// the locks a test holds before it ends (defer lock.Release): a hold left
// on keeps the library's watch and renewal of it running until its local
// deadline, against a server that is gone, and goleak reports those
// goroutines.
type Server struct {
	// Addr is the server's host:port on loopback.
	Addr string

	t     testing.TB
	mini  *miniredis.Miniredis // nil for a real server
	real  *redistest.Server    // nil for the in-process server
	admin *redis.Client        // the kit's own connection

	mu     sync.Mutex
	outage *time.Timer // the running Outage's end; nil when none
}

// NewMini starts an in-process Redis (miniredis) for t and closes it when t
// ends. Its keys expire on the wall clock, as a real server's do
// (miniredis itself only moves time on FastForward), and FastForward jumps
// ahead. miniredis has no client-side caching: a Lock on it finds a loss
// at its next renewal or its local deadline, never at once.
func NewMini(t testing.TB) *Server {
	t.Helper()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatalf("redislocktest: start miniredis: %v", err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	s := &Server{Addr: m.Addr(), t: t, mini: m}
	t.Cleanup(func() {
		close(stop)
		<-stopped
		m.Close()
	})
	s.admin = s.Client()
	return s
}

// RequireRealEnv names the environment variable that, set to 1, makes
// NewReal fail rather than skip when redis-server is not installed: for a
// CI that must run the real-server tests.
const RequireRealEnv = "REDISLOCKTEST_REQUIRE_REAL"

// NewReal starts a real redis-server for t on a free loopback port (no
// persistence, noeviction) and stops it when t ends. When no redis-server
// is on PATH it skips t, saying how to install one (fails it when
// REDISLOCKTEST_REQUIRE_REAL=1).
func NewReal(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := "redislocktest: redis-server not found on PATH: install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) to run this real-server test"
		if os.Getenv(RequireRealEnv) == "1" {
			t.Fatal(msg + " (" + RequireRealEnv + "=1)")
		}
		t.Skip(msg)
	}
	r := redistest.Start(t)
	s := &Server{Addr: r.Addr, t: t, real: r}
	s.admin = s.Client()
	return s
}

// Client returns a new client of the server with ContextTimeoutEnabled, as
// the library's README advises, closed when the test ends, after the
// connections and goroutines the library ran beside it are stopped
// (redislock.Shutdown). opts, if any, adjust its options.
func (s *Server) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	s.t.Cleanup(func() {
		redislock.Shutdown(c)
		c.Close()
	})
	return c
}

// Miniredis returns the in-process server, for what the kit does not
// wrap; nil for a real server.
func (s *Server) Miniredis() *miniredis.Miniredis { return s.mini }

// IsReal reports whether the server is a real redis-server.
func (s *Server) IsReal() bool { return s.mini == nil }

// FastForward moves the in-process server's clock ahead by d: keys whose
// TTL runs out meanwhile expire at once. A held lock's key may expire
// that way; its holder learns of it at its next renewal or local deadline
// (see the package doc on time). On a real server it fails the test: its
// clock cannot be moved.
func (s *Server) FastForward(d time.Duration) {
	s.t.Helper()
	if s.mini == nil {
		s.t.Fatal("redislocktest: FastForward needs the in-process server (NewMini); a real server's clock cannot be moved")
	}
	s.mini.FastForward(d)
}

// Loss reasons for ForceLoss.
var (
	// Expired: the key is deleted, as by an expiry, a Reset or an
	// eviction; the hold ends with redislock.ErrExpired.
	Expired = redislock.ErrExpired
	// TakenOver: the key holds another owner's id, as when it expired and
	// someone else acquired it; the hold ends with redislock.ErrTakenOver.
	TakenOver = redislock.ErrTakenOver
)

// thiefID is the owner id ForceLoss writes for TakenOver (stealingID the
// one Steal writes first), and thiefTTL that owner's expire: long enough
// for any holder to see it (a key that kept the holder's own short TTL
// could expire first, and the loss read as an expiry).
const (
	thiefID    = "redislocktest:another-owner"
	stealingID = "redislocktest:stealing"
	thiefTTL   = time.Minute
)

// mustHold fails the test unless l's key on this server holds l's id: a
// helper given a Lock that does not hold its lock here (never acquired,
// released, lost, or on another server) would change some other holder's
// key. In-process it reads the server's data directly, so it works during
// an Outage.
func (s *Server) mustHold(helper string, l *redislock.Lock) {
	s.t.Helper()
	var (
		v   string
		err error
	)
	if s.mini != nil {
		v, err = s.mini.Get(l.Key())
	} else {
		v, err = s.admin.Get(context.Background(), l.Key()).Result()
	}
	if err != nil || v != l.ID() {
		if err != nil {
			v = "nothing (" + err.Error() + ")"
		} else {
			v = fmt.Sprintf("%q", v)
		}
		s.t.Fatalf("redislocktest: %s: the Lock does not hold its lock on %v: its key %q holds %s, not its id %q", helper, s, l.Key(), v, l.ID())
	}
}

// ForceLoss makes h, a *redislock.Lock, *redislock.Permit or
// *redislock.RWMutex, lose the hold it has as a real outage would:
//   - a Lock's key, with Expired, is deleted; with TakenOver it is
//     overwritten by another owner's id, which holds it for a minute (delete
//     the key, or Reset the lock, to free it sooner; Steal gives a thief
//     that can release);
//   - an RWMutex's write hold is lost as a Lock's;
//   - a Permit, a Semaphore's or an RWMutex's read permit, is dropped from
//     the holders (Expired only: a permit cannot be taken over).
//
// Nothing is changed in h: it learns of the loss as in production, at once
// where its key is watched (a Lock's or a writer's, on a real server,
// WithTracking on by default), else at its next renewal or at its local
// deadline. Done then closes and Err matches redislock.ErrLost and reason;
// a Do callback's context is cancelled. A hold with no expire (New's
// default) has neither renewal nor deadline: on the in-process server, or
// with tracking off, it never learns of the loss.
//
// It fails the test when h holds nothing on this server, for a reason
// other than Expired and TakenOver, and for any other type. During an
// Outage the in-process server is changed at once; a real one when the
// outage ends.
func (s *Server) ForceLoss(h interface {
	Key() string
	ID() string
}, reason error) {
	s.t.Helper()
	if reason != Expired && reason != TakenOver {
		s.t.Fatalf("redislocktest: ForceLoss reason %v: want redislocktest.Expired or redislocktest.TakenOver", reason)
	}
	switch h := h.(type) {
	case *redislock.Lock:
		s.mustHold("ForceLoss", h)
		if err := s.overwrite(h.Key(), reason == TakenOver, thiefID); err != nil {
			s.t.Fatalf("redislocktest: ForceLoss: %v", err)
		}
	case *redislock.Permit:
		if reason != Expired {
			s.t.Fatalf("redislocktest: ForceLoss: a permit cannot be taken over: use redislocktest.Expired")
		}
		s.dropHold(h.Key(), h.ID())
	case *redislock.RWMutex:
		s.forceLossRW(h, reason)
	default:
		s.t.Fatalf("redislocktest: ForceLoss of a %T: want a *redislock.Lock, *redislock.Permit or *redislock.RWMutex", h)
	}
}

// overwrite deletes key, or (set) gives it id for thiefTTL.
func (s *Server) overwrite(key string, set bool, id string) error {
	if s.mini != nil {
		if !set {
			s.mini.Del(key)
			return nil
		}
		if err := s.mini.Set(key, id); err != nil {
			return err
		}
		s.mini.SetTTL(key, thiefTTL)
		return nil
	}
	ctx := context.Background()
	if !set {
		return s.admin.Del(ctx, key).Err()
	}
	return s.admin.Set(ctx, key, id, thiefTTL).Err()
}

// Steal makes another owner take l's lock, and returns that owner: a new
// Lock for the same name, with opts, which holds the lock. Give it the
// options l has (its fencing token is then above l's, and its key
// expires as l's would: with no options, 30 s after the thief stops
// renewing it; with WithExpire(0), never), at least
// redislock.WithKeyPrefix and redislock.WithFencing when l has them; it
// fails the test when the thief's key or token shows they differ. For
// testing that fencing and Lock.Guard refuse l's late writes.
//
// l learns of the loss as ForceLoss describes, with redislock.ErrTakenOver:
// the key first gets another owner's id, and only then is it freed for the
// thief's acquire (a holder watching its key sees a takeover, never a
// moment without key). It fails the test when l's key does not hold l's
// id, and needs the server up (not during an Outage).
func (s *Server) Steal(l *redislock.Lock, opts ...redislock.Option) *redislock.Lock {
	s.t.Helper()
	ctx := context.Background()
	thief, err := redislock.New(s.admin, l.Name(), opts...)
	if err != nil {
		s.t.Fatalf("redislocktest: Steal: %v", err)
	}
	if thief.Key() != l.Key() {
		s.t.Fatalf("redislocktest: Steal: the thief's key %q is not %q: give it l's WithKeyPrefix", thief.Key(), l.Key())
	}
	s.mustHold("Steal", l)
	if err := s.overwrite(l.Key(), true, stealingID); err != nil {
		s.t.Fatalf("redislocktest: Steal: %v", err)
	}
	if s.mini == nil {
		// A watched holder hears of the takeover within milliseconds; let
		// it, before the key is briefly missing.
		select {
		case <-l.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := s.overwrite(l.Key(), false, ""); err != nil {
		s.t.Fatalf("redislocktest: Steal: %v", err)
	}
	if err := thief.TryAcquire(ctx); err != nil {
		s.t.Fatalf("redislocktest: Steal: %v", err)
	}
	if l.Token() != 0 && thief.Token() <= l.Token() {
		thief.Release(ctx)
		s.t.Fatalf("redislocktest: Steal: the thief's fencing token %d is not above the holder's %d: give it redislock.WithFencing", thief.Token(), l.Token())
	}
	return thief
}

// Outage makes the server stop serving for d, starting now, and returns
// at once. In-process every command fails with an error reply; a real
// server is stopped (SIGSTOP), so commands hang and time out, as when a
// server stalls or the network drops its packets. A renewal that fails is
// retried until the hold's local deadline: a hold always survives an
// outage shorter than about a fifth of its expire (a third, less the
// safety margin and the pause between retries), never one longer than
// its expire, and between those it depends on where the outage falls
// between two renewals. A hold that does not survive is lost with
// redislock.ErrUnreachable at its deadline. The outage ends after d, or
// when the test ends. A second Outage while one runs fails the test.
func (s *Server) Outage(d time.Duration) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outage != nil {
		s.t.Fatal("redislocktest: Outage while another runs")
	}
	if s.mini == nil {
		s.real.Pause()
	} else {
		s.mini.SetError("redislocktest: outage")
	}
	end := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.outage == nil {
			return
		}
		s.outage = nil
		if s.mini != nil {
			s.mini.SetError("")
		} else {
			s.real.Cont()
		}
	}
	s.outage = time.AfterFunc(d, end)
	s.t.Cleanup(func() {
		s.mu.Lock()
		t := s.outage
		s.mu.Unlock()
		if t != nil && t.Stop() {
			end()
		}
	})
}

// String describes the server.
func (s *Server) String() string {
	if s.mini != nil {
		return fmt.Sprintf("miniredis on %s", s.Addr)
	}
	return fmt.Sprintf("redis-server on %s", s.Addr)
}
