package redislocktest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
	"github.com/go-redis-lock/redislock/redislocktest"
)

// recorder is a testing.TB whose Fatal records the message and stops the
// helper that called it (a panic the test recovers), and whose Cleanup
// functions the test runs itself; the rest goes to the real test.
type recorder struct {
	testing.TB
	fatal    string
	cleanups []func()
}

type fatalStop struct{}

func (r *recorder) Fatal(args ...any) { r.fatal = fmt.Sprint(args...); panic(fatalStop{}) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic(fatalStop{})
}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// cleanup runs the recorded Cleanup functions, last first.
func (r *recorder) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

// fails runs fn and returns the message it failed the test with, or "".
func (r *recorder) fails(fn func()) (msg string) {
	r.fatal = ""
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(fatalStop); !ok {
				panic(v)
			}
			msg = r.fatal
		}
	}()
	fn()
	return ""
}

// newOn starts the kind of server named on r.
func newOn(kind string, r *recorder) *redislocktest.Server {
	if kind == "mini" {
		return redislocktest.NewMini(r)
	}
	return redislocktest.NewReal(r)
}

// Misuse of a helper fails the test with a message that says what is
// wrong, and changes nothing on the server.
func TestMisuseFailsTheTest(t *testing.T) {
	for _, kind := range []string{"mini", "real"} {
		t.Run(kind, func(t *testing.T) {
			r := &recorder{TB: t}
			defer r.cleanup()
			s := newOn(kind, r)
			ctx := context.Background()
			l, err := redislock.New(s.Client(), "job", redislock.WithExpire(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			want := func(what, msg, part string) {
				t.Helper()
				if !strings.Contains(msg, part) {
					t.Errorf("%s: failed with %q, want a message containing %q", what, msg, part)
				}
			}
			want("ForceLoss with another reason", r.fails(func() { s.ForceLoss(l, errors.New("gone")) }), "want redislocktest.Expired or redislocktest.TakenOver")
			idle, err := redislock.New(s.Client(), "job")
			if err != nil {
				t.Fatal(err)
			}
			want("ForceLoss of a Lock that does not hold", r.fails(func() { s.ForceLoss(idle, redislocktest.Expired) }), "does not hold its lock")
			want("Steal from a Lock that does not hold", r.fails(func() { s.Steal(idle) }), "does not hold its lock")
			sem, err := redislock.NewSemaphore(s.Client(), "pool", 2)
			if err != nil {
				t.Fatal(err)
			}
			released, err := sem.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := released.Release(ctx); err != nil {
				t.Fatal(err)
			}
			want("ForceLoss of a released Permit", r.fails(func() { s.ForceLoss(released, redislocktest.Expired) }), "ForceLoss")
			want("ForceLoss of a permit as taken over", r.fails(func() { s.ForceLoss(released, redislocktest.TakenOver) }), "a permit cannot be taken over")
			want("ForceLoss of another type", r.fails(func() { s.ForceLoss(idleHolder{}, redislocktest.Expired) }), "want a *redislock.Lock, *redislock.Permit or *redislock.RWMutex")
			want("Steal with another key prefix", r.fails(func() { s.Steal(l, redislock.WithKeyPrefix("other:")) }), "give it l's WithKeyPrefix")
			if owner, err := l.OwnerID(ctx); err != nil || owner != l.ID() {
				t.Fatalf("after the refused calls the key holds %q (%v), want the holder's id", owner, err)
			}
			if kind == "real" {
				want("FastForward on a real server", r.fails(func() { s.FastForward(time.Second) }), "needs the in-process server")
			}
			// A hold left on when the server stops keeps the library's
			// watch of it until its local deadline (goleak sees that).
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			s.Outage(300 * time.Millisecond)
			want("a second Outage", r.fails(func() { s.Outage(time.Second) }), "Outage while another runs")
		})
	}
}

// Steal refuses a thief whose token is not above a fencing holder's, and
// a watched holder sees the steal as a takeover.
func TestStealChecksTheToken(t *testing.T) {
	for _, kind := range []string{"mini", "real"} {
		t.Run(kind, func(t *testing.T) {
			r := &recorder{TB: t}
			defer r.cleanup()
			s := newOn(kind, r)
			ctx := context.Background()
			l, err := redislock.New(s.Client(), "job", redislock.WithExpire(time.Minute), redislock.WithFencing())
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			msg := r.fails(func() { s.Steal(l, redislock.WithExpire(time.Minute)) })
			if !strings.Contains(msg, "give it redislock.WithFencing") {
				t.Fatalf("Steal without WithFencing failed with %q, want it to ask for WithFencing", msg)
			}
			if kind == "real" { // watched: the takeover is seen at once
				select {
				case <-l.Done():
				case <-time.After(2 * time.Second):
					t.Fatal("Done still open 2 s after Steal")
				}
				if !errors.Is(l.Err(), redislock.ErrTakenOver) {
					t.Fatalf("Err() after Steal = %v, want ErrTakenOver", l.Err())
				}
			}
		})
	}
}

// ForceLoss acts at once on the in-process server during an Outage.
func TestForceLossDuringOutage(t *testing.T) {
	s := redislocktest.NewMini(t)
	ctx := context.Background()
	l, err := redislock.New(s.Client(), "job", redislock.WithExpire(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	s.Outage(300 * time.Millisecond)
	s.ForceLoss(l, redislocktest.TakenOver)
	if v, err := s.Miniredis().Get(l.Key()); err != nil || v == l.ID() {
		t.Fatalf("during the outage the key holds %q (%v), want another owner's id", v, err)
	}
}

// An Outage still running when the test ends is ended by the test's
// cleanup, and the server serves again at once.
func TestOutageEndsWithTheTest(t *testing.T) {
	for _, kind := range []string{"mini", "real"} {
		t.Run(kind, func(t *testing.T) { testOutageEndsWithTheTest(t, kind) })
	}
}

func testOutageEndsWithTheTest(t *testing.T, kind string) {
	r := &recorder{TB: t}
	defer r.cleanup()
	s := newOn(kind, r)
	c := s.Client(func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond; o.MaxRetries = -1 })
	n := len(r.cleanups)
	s.Outage(time.Hour)
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING answered during the outage")
	}
	for _, f := range r.cleanups[n:] { // the Outage's own cleanup
		f()
	}
	r.cleanups = r.cleanups[:n]
	start := time.Now()
	if err := c.Ping(context.Background()).Err(); err != nil || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("PING after the test's cleanup ended the outage: %v after %v", err, time.Since(start))
	}
}

// idleHolder has a key and an id, but is none of the types ForceLoss knows.
type idleHolder struct{}

func (idleHolder) Key() string { return "lock:job" }
func (idleHolder) ID() string  { return "someone" }
