package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// topLevel keeps the commands the lock sends, and EXISTS, which the
// acquire script runs once inside Redis when it was not woken (the turn
// check: see internal/wire/lua/acquire.lua); commandstats also counts the other commands
// that scripts run (get, set, del, ...), and the tests' own INFO.
func topLevel(d map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for _, name := range []string{"evalsha", "eval", "blpop", "exists", "script|load"} {
		if d[name] != 0 {
			out[name] = d[name]
		}
	}
	return out
}

// An uncontended acquire+release is two commands: one EVALSHA each (the
// acquire's script runs one EXISTS inside).
func TestCommandsPerUncontendedCycle(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	l := mustNew(t, s.Client(), "job", redislock.WithExpire(10*time.Second))
	// Warm up: the first EVALSHA of each script is NOSCRIPT, then EVAL.
	mustAcquire(t, ctx, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	const cycles = 50
	before := commandStats(t, admin)
	for i := 0; i < cycles; i++ {
		mustAcquire(t, ctx, l)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := topLevel(delta(before, commandStats(t, admin)))
	t.Logf("commands for %d cycles: %v", cycles, got)
	if len(got) != 2 || got["evalsha"] != 2*cycles || got["exists"] != cycles {
		t.Fatalf("commands for %d uncontended cycles = %v, want evalsha=%d (and exists=%d inside the scripts)", cycles, got, 2*cycles, cycles)
	}
}

// A hand-off to a waiter that arrives while the lock is held costs three
// commands: its BLPOP and the SET NX pipelined behind it, and the holder's
// release (EVALSHA). A waiter whose own last release was a
// hand-off (the two Locks take turns) waits first, sending no try before
// its BLPOP, for the rest of that release's 100 ms turn; after that, or
// at its first wait, it tries first (a fourth command, with an EXISTS
// inside). Redis counts a BLPOP when it is called, so the count starts
// before the waiter does.
func TestCommandsPerHandoff(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	a := mustNew(t, s.Client(), "job", redislock.WithExpire(10*time.Second))
	b := mustNew(t, s.Client(), "job", redislock.WithExpire(10*time.Second))
	for _, l := range []*redislock.Lock{a, b} { // load the scripts
		mustAcquire(t, ctx, l)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	admin.Del(ctx, "lock-signal:job") // the warm-up's signal would wake the first waiter at once
	const handoffs = 20
	holder, waiter := a, b
	mustAcquire(t, ctx, holder)
	var total map[string]int64
	for i := 0; i < handoffs; i++ {
		before := commandStats(t, admin)
		handOff(t, ctx, admin, holder, waiter)
		d := topLevel(delta(before, commandStats(t, admin)))
		if total == nil {
			total = d
		} else {
			for k, v := range d {
				total[k] += v
			}
		}
		holder, waiter = waiter, holder
	}
	t.Logf("commands for %d hand-offs (release + wake + try): %v", handoffs, total)
	tries := total["exists"] // one inside each try sent before a BLPOP
	if total["evalsha"] != handoffs+tries || total["blpop"] != handoffs || len(total) > 3 {
		t.Fatalf("commands for %d hand-offs = %v, want evalsha=%d blpop=%d, plus an EVALSHA for each try before a wait (exists)", handoffs, total, handoffs, handoffs)
	}
	// The first waiter has no hand-off of its own behind it; the others
	// come within microseconds of theirs (a loaded machine may stretch a
	// few past the 100 ms turn).
	if tries > handoffs/2 {
		t.Fatalf("%d of %d waiters tried before waiting, though their own last release had handed the lock off moments before", tries, handoffs)
	}
}

// A Lock that goes on alone after taking turns with another waits first
// only while the other is still there: once its own release finds that no
// one else held the lock since its previous one, it tries first again,
// and an uncontended cycle is back to two commands, no BLPOP.
func TestHandOffEndsWithTheContention(t *testing.T) {
	quick(t)
	s, ctx, admin := started(t)
	a := mustNew(t, s.Client(), "job", redislock.WithExpire(10*time.Second))
	b := mustNew(t, s.Client(), "job", redislock.WithExpire(10*time.Second))
	holder, waiter := a, b
	mustAcquire(t, ctx, holder)
	for range 4 { // take turns: each release hands the lock off
		handOff(t, ctx, admin, holder, waiter)
		holder, waiter = waiter, holder
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	before := commandStats(t, admin)
	const cycles = 10
	for range cycles { // the other Lock is gone
		mustAcquire(t, ctx, holder)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := topLevel(delta(before, commandStats(t, admin)))
	t.Logf("commands for %d cycles after the contention: %v", cycles, got)
	if got["blpop"] > 1 {
		t.Fatalf("%d BLPOPs in %d cycles of a Lock left alone, want at most 1 (the wait right after the last hand-off)", got["blpop"], cycles)
	}
}

// handOff has waiter wait for the lock (blocked in BLPOP, which admin's
// server counts) while holder holds it, then holder release it, and waits
// until waiter holds it.
func handOff(t *testing.T, ctx context.Context, admin *redis.Client, holder, waiter *redislock.Lock) {
	t.Helper()
	done := acquireAsync(ctx, waiter)
	waitBlocked(t, admin, 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, done); r.err != nil {
		t.Fatal(r.err)
	}
}
