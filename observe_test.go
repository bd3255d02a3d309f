package redislock_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-redis-lock/redislock"
)

// logRecorder is a slog.Handler that keeps every record at or above its
// level, with its attributes flattened ("holder.id").
type logRecorder struct {
	level slog.Level
	mu    sync.Mutex
	recs  []logLine
}

type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler           { return r }
func (r *logRecorder) WithGroup(string) slog.Handler                { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	line := logLine{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	var add func(prefix string, a slog.Attr)
	add = func(prefix string, a slog.Attr) {
		if a.Value.Kind() == slog.KindGroup {
			for _, g := range a.Value.Group() {
				add(prefix+a.Key+".", g)
			}
			return
		}
		line.attrs[prefix+a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool { add("", a); return true })
	r.mu.Lock()
	r.recs = append(r.recs, line)
	r.mu.Unlock()
	return nil
}

// lines returns the records written so far under the Python logger name.
func (r *logRecorder) lines(logger string) []logLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logLine
	for _, l := range r.recs {
		if l.attrs["logger"] == logger {
			out = append(out, l)
		}
	}
	return out
}

// find returns the first record of logger at level, waiting up to 5 s
// for it (a loss is logged by the goroutine that finds it).
func (r *logRecorder) find(t *testing.T, logger string, level slog.Level, msg string) logLine {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, l := range r.lines(logger) {
			if l.level == level && strings.Contains(l.msg, msg) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v line %q of logger %s; have %v", level, msg, logger, r.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *logRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.recs {
		out = append(out, l.level.String()+" "+l.attrs["logger"]+": "+l.msg)
	}
	return out
}

func (r *logRecorder) none(t *testing.T, logger string, level slog.Level) {
	t.Helper()
	for _, l := range r.lines(logger) {
		if l.level == level {
			t.Fatalf("unexpected %v line of %s: %q %v", level, logger, l.msg, l.attrs)
		}
	}
}

// Every event python-redis-lock logs, at its level and under its logger
// name, and the ones it does not, on a real server.
func TestLogEvents(t *testing.T) {
	quick(t)
	b := realBackend(t)
	ctx := ctxT(t)
	rec := &logRecorder{level: slog.LevelDebug}
	log := slog.New(rec)
	c := b.client()

	holder := mustNew(t, c, "job", redislock.WithExpire(300*time.Millisecond), redislock.WithAutoRenewal(),
		redislock.WithFencing(), redislock.WithLogger(log))
	mustAcquire(t, ctx, holder)
	acquired := rec.find(t, "redis_lock.acquire", slog.LevelInfo, "acquired")
	for k, want := range map[string]string{"lock": "job", "key": "lock:job", "owner": holder.ID()} {
		if acquired.attrs[k] != want {
			t.Errorf("acquired line's %s = %q, want %q", k, acquired.attrs[k], want)
		}
	}
	if acquired.attrs["wait"] == "" || acquired.attrs["token"] == "" || acquired.attrs["token"] == "0" {
		t.Errorf("acquired line's wait, token = %q, %q; want both", acquired.attrs["wait"], acquired.attrs["token"])
	}
	rec.find(t, "redis_lock.acquire", slog.LevelDebug, "acquiring")
	start := rec.find(t, "redis_lock.refresh.start", slog.LevelDebug, "starting renewal")
	if start.attrs["interval"] == "" {
		t.Errorf("renewal start line without interval: %v", start.attrs)
	}
	rec.find(t, "redis_lock.refresh.thread", slog.LevelDebug, "renewing")

	// A non-blocking miss is a warning; a blocking timeout is not.
	other := mustNew(t, b.client(), "job", redislock.WithLogger(log))
	if err := other.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("TryAcquire() = %v, want ErrLocked", err)
	}
	miss := rec.find(t, "redis_lock.acquire", slog.LevelWarn, "failed to acquire")
	if miss.attrs["owner"] != other.ID() {
		t.Errorf("miss line's owner = %q, want the trier's %q", miss.attrs["owner"], other.ID())
	}
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := other.Acquire(waitCtx); !errors.Is(err, redislock.ErrLocked) {
		t.Fatalf("Acquire() with 50 ms = %v, want ErrLocked", err)
	}
	cancel()
	if n := len(slices.DeleteFunc(rec.lines("redis_lock.acquire"), func(l logLine) bool { return l.level != slog.LevelWarn })); n != 1 {
		t.Errorf("%d WARN lines of redis_lock.acquire, want 1 (the non-blocking miss only)", n)
	}
	// The blocking waiter said who it waited for.
	waiting := rec.find(t, "redis_lock.acquire", slog.LevelInfo, "waiting")
	if waiting.attrs["holder.id"] != holder.ID() || waiting.attrs["holder.host"] == "" || waiting.attrs["holder.pid"] == "" {
		t.Errorf("waiting line's holder = %v, want the holder's id %q, host and pid", waiting.attrs, holder.ID())
	}

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rec.find(t, "redis_lock.release", slog.LevelDebug, "releasing")
	rec.find(t, "redis_lock.refresh.shutdown", slog.LevelDebug, "stopping renewal")
	rec.find(t, "redis_lock.refresh.exit", slog.LevelDebug, "renewal exited")
	rec.none(t, "redis_lock.lost", slog.LevelError)
	rec.none(t, "redis_lock.release", slog.LevelWarn)

	// Reset, then a Release that finds the key gone: INFO, then WARN.
	mustAcquire(t, ctx, holder)
	if _, err := holder.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	reset := rec.find(t, "redis_lock.reset", slog.LevelInfo, "reset lock")
	if reset.attrs["count"] != "1" || reset.attrs["lock"] != "job" {
		t.Errorf("reset line = %v, want lock job, count 1", reset.attrs)
	}
	// The Reset is a loss for the holder's tracked hold.
	lost := rec.find(t, "redis_lock.lost", slog.LevelError, "lock lost")
	if lost.attrs["reason"] != "expired" || lost.attrs["owner"] != holder.ID() || lost.attrs["error"] == "" {
		t.Errorf("lost line = %v, want reason expired, the holder's id and the error", lost.attrs)
	}
	if err := holder.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("Release() after Reset = %v, want ErrNotAcquired", err)
	}

	mustAcquire(t, ctx, other)
	n, err := redislock.ResetAll(ctx, c, redislock.WithLogger(log))
	if err != nil || n != 1 {
		t.Fatalf("ResetAll() = %d, %v; want 1, nil", n, err)
	}
	all := rec.find(t, "redis_lock.reset", slog.LevelInfo, "reset all")
	if all.attrs["count"] != "1" {
		t.Errorf("reset all line = %v, want count 1", all.attrs)
	}
}

// A Release that finds the lock taken by another owner warns.
func TestLogReleaseOfTakenLock(t *testing.T) {
	quick(t)
	b := realBackend(t)
	ctx := ctxT(t)
	rec := &logRecorder{level: slog.LevelWarn}
	l := mustNew(t, b.client(), "job", redislock.WithExpire(time.Minute), redislock.WithTracking(false), redislock.WithLogger(slog.New(rec)))
	mustAcquire(t, ctx, l)
	if err := b.client().Set(ctx, l.Key(), "someone-else", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("Release() = %v, want ErrNotAcquired", err)
	}
	w := rec.find(t, "redis_lock.release", slog.LevelWarn, "no longer ours")
	if w.attrs["outcome"] != "taken_over" {
		t.Errorf("release warning = %v, want outcome taken_over", w.attrs)
	}
	rec.find(t, "redis_lock.lost", slog.LevelError, "lock lost")
}

// A renewal that fails is a warning with the error and the time left; an
// acquire whose reply was lost is given back with a warning.
func TestLogRenewalFailureAndGiveback(t *testing.T) {
	quick(t)
	b := realBackend(t)
	ctx := ctxT(t)
	rec := &logRecorder{level: slog.LevelWarn}
	log := slog.New(rec)
	c := b.client()
	var failExtend, failAcquire sync.Once
	injected := errors.New("injected: connection reset")
	c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		switch scriptOf(cmd) {
		case "extend":
			fail := false
			failExtend.Do(func() { fail = true })
			if fail {
				cmd.SetErr(injected) // not sent: a renewal that failed
				return injected
			}
		case "acquire":
			err := next(ctx, cmd)
			if err != nil {
				return err // NOSCRIPT: the EVAL that follows is the one
			}
			fail := false
			failAcquire.Do(func() { fail = true })
			if fail {
				cmd.SetErr(io.ErrUnexpectedEOF) // ran, and its reply was lost
				return io.ErrUnexpectedEOF
			}
			return err
		}
		return next(ctx, cmd)
	}))
	l := mustNew(t, c, "job", redislock.WithExpire(600*time.Millisecond), redislock.WithAutoRenewal(), redislock.WithTracking(false), redislock.WithLogger(log))
	if err := l.Acquire(ctx); err == nil {
		t.Fatal("Acquire() with a lost reply = nil, want its error")
	}
	rec.find(t, "redis_lock.acquire", slog.LevelWarn, "giving back")
	if err := l.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, ctx, l)
	w := rec.find(t, "redis_lock.refresh.thread", slog.LevelWarn, "renewal failed")
	if !strings.Contains(w.attrs["error"], "injected") || w.attrs["left"] == "" {
		t.Errorf("renewal warning = %v, want the error and the time left", w.attrs)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() = %v (the retried renewal kept the lock)", err)
	}
	rec.none(t, "redis_lock.lost", slog.LevelError)
}

// recorder is an Observer that keeps every event, in order, each with
// the name of the func it came to.
type recorder struct {
	mu     sync.Mutex
	events []recorded
	// refusals are the WatchRefused events, kept apart: they come from
	// the watch's goroutine at any moment (on miniredis, which refuses
	// the watch, after every first acquire), between the others.
	refusals []redislock.Event
}

type ctxMark struct{}

// recorded is one event a recorder received, through the func named fn.
type recorded struct {
	fn string
	redislock.Event
}

func (r *recorder) add(fn string, e redislock.Event) {
	r.mu.Lock()
	r.events = append(r.events, recorded{fn, e})
	r.mu.Unlock()
}

// start records a Start event and marks the context the call goes on
// with; end records its End (or a Wakeup), which must come with that
// context.
func (r *recorder) start(ctx context.Context, fn, mark string, e redislock.Event) context.Context {
	r.add(fn, e)
	return context.WithValue(ctx, ctxMark{}, mark)
}

func (r *recorder) end(ctx context.Context, fn, mark string, e redislock.Event) {
	if ctx.Value(ctxMark{}) != mark {
		panic(fn + " without its Start's context")
	}
	r.add(fn, e)
}

func (r *recorder) AcquireStart(ctx context.Context, e redislock.Event) context.Context {
	return r.start(ctx, "AcquireStart", "acquire", e)
}
func (r *recorder) AcquireEnd(ctx context.Context, e redislock.Event) {
	r.end(ctx, "AcquireEnd", "acquire", e)
}
func (r *recorder) Wakeup(ctx context.Context, e redislock.Event) { r.end(ctx, "Wakeup", "acquire", e) }
func (r *recorder) ReleaseStart(ctx context.Context, e redislock.Event) context.Context {
	return r.start(ctx, "ReleaseStart", "release", e)
}
func (r *recorder) ReleaseEnd(ctx context.Context, e redislock.Event) {
	r.end(ctx, "ReleaseEnd", "release", e)
}
func (r *recorder) ExtendStart(ctx context.Context, e redislock.Event) context.Context {
	return r.start(ctx, "ExtendStart", "extend", e)
}
func (r *recorder) ExtendEnd(ctx context.Context, e redislock.Event) {
	r.end(ctx, "ExtendEnd", "extend", e)
}
func (r *recorder) HoldEnd(e redislock.Event) { r.add("HoldEnd", e) }
func (r *recorder) WatchRefused(e redislock.Event) {
	r.mu.Lock()
	r.refusals = append(r.refusals, e)
	r.mu.Unlock()
}

// observer is the Observer that hands every event to r.
func (r *recorder) observer() *redislock.Observer {
	return &redislock.Observer{
		AcquireStart: r.AcquireStart, AcquireEnd: r.AcquireEnd, Wakeup: r.Wakeup,
		ReleaseStart: r.ReleaseStart, ReleaseEnd: r.ReleaseEnd,
		ExtendStart: r.ExtendStart, ExtendEnd: r.ExtendEnd,
		HoldEnd: r.HoldEnd, WatchRefused: r.WatchRefused,
	}
}

func (r *recorder) take() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// The observer sees each call's events, in order, with their outcomes, on
// both backends.
func TestObserverEvents(t *testing.T) {
	quick(t)
	onBoth(t, func(t *testing.T, ctx context.Context, b *backend) {
		obs := &recorder{}
		holder := mustNew(t, b.client(), "job", redislock.WithExpire(time.Minute), redislock.WithFencing(), redislock.WithObserver(obs.observer()))
		wc := b.client()
		waiter := mustNew(t, wc, "job", redislock.WithExpire(time.Minute), redislock.WithObserver(obs.observer()))

		mustAcquire(t, ctx, holder)
		ev := obs.take()
		if len(ev) != 2 {
			t.Fatalf("Acquire: %d events %v, want start and end", len(ev), ev)
		}
		end := ev[1]
		if ev[0].fn != "AcquireStart" || end.fn != "AcquireEnd" || !ev[0].Blocking || end.Outcome != redislock.OutcomeAcquired || end.Token <= 0 || end.ID != holder.ID() || end.Name != "job" {
			t.Fatalf("Acquire events = %+v, want blocking, acquired with a token, the holder's id", ev)
		}

		if err := waiter.TryAcquire(ctx); !errors.Is(err, redislock.ErrLocked) {
			t.Fatal(err)
		}
		if end := obs.take()[1]; end.Outcome != redislock.OutcomeBusy || end.Blocking {
			t.Fatalf("TryAcquire miss: %+v, want busy, not blocking", end)
		}
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		err := waiter.Acquire(short)
		cancel()
		if !errors.Is(err, redislock.ErrLocked) {
			t.Fatal(err)
		}
		ev = obs.take()
		if end := ev[len(ev)-1]; end.Outcome != redislock.OutcomeTimeout {
			t.Fatalf("Acquire timeout: %+v, want timeout", end)
		}
		if err := waiter.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		obs.take()

		if err := holder.Extend(ctx, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		ev = obs.take()
		if e := ev[1]; e.fn != "ExtendEnd" || e.Auto || e.By != 2*time.Minute || e.Outcome != redislock.OutcomeExtended {
			t.Fatalf("Extend: %+v, want manual, 2m, extended", e)
		}

		inLine := waiting(wc)
		got := make(chan error, 1)
		go func() { got <- waiter.Acquire(ctx) }()
		<-inLine
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		var kinds []string
		var woken, released, heldEnd bool
		for _, e := range obs.take() {
			switch e.fn {
			case "Wakeup":
				woken = woken || e.Woken
			case "ReleaseEnd":
				released = e.Outcome == redislock.OutcomeReleased && e.Held > 0 && e.ID == holder.ID()
			case "HoldEnd":
				if e.ID == holder.ID() {
					heldEnd = errors.Is(e.Err, redislock.ErrReleased) && e.Outcome == redislock.OutcomeReleased && e.Token > 0
				}
			}
			kinds = append(kinds, e.fn)
		}
		if !woken || !released || !heldEnd {
			t.Fatalf("hand-off events %v: woken by a signal %v, released %v, the hold's end %v; want all", kinds, woken, released, heldEnd)
		}

		if b.mini != nil {
			return // miniredis has no client tracking: the loss would wait for the deadline
		}
		// A loss: the key deleted under the waiter's tracked hold.
		if err := b.client().Del(ctx, waiter.Key()).Err(); err != nil {
			t.Fatal(err)
		}
		<-waiter.Done()
		deadline := time.Now().Add(5 * time.Second)
		for {
			var lost *recorded
			for _, e := range obs.take() {
				if e.fn == "HoldEnd" {
					lost = &e
				}
			}
			if lost != nil {
				if lost.Outcome != redislock.OutcomeExpired || !errors.Is(lost.Err, redislock.ErrLost) {
					t.Fatalf("loss: %+v, want reason expired and ErrLost", lost)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no HoldEnd 5 s after the loss")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// slowObserver is a recorder's Observer whose AcquireEnd takes delay, as a
// slow exporter's would.
func slowObserver(r *recorder, delay time.Duration) *redislock.Observer {
	o := r.observer()
	o.AcquireEnd = func(ctx context.Context, e redislock.Event) {
		time.Sleep(delay)
		r.AcquireEnd(ctx, e)
	}
	return o
}

// A hold that ends while its AcquireEnd is still being reported (a slow
// observer or logger before it) has its HoldEnd reported after it, never
// before.
func TestHoldEndComesAfterAcquireEnd(t *testing.T) {
	quick(t)
	b := realBackend(t)
	ctx := ctxT(t)
	rec := &recorder{}
	l := mustNew(t, b.client(), "job", redislock.WithExpire(100*time.Millisecond),
		redislock.WithObserver(slowObserver(&recorder{}, 300*time.Millisecond)), redislock.WithObserver(rec.observer()))
	mustAcquire(t, ctx, l) // its hold is lost (expired) while the first observer sleeps
	<-l.Done()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ev := rec.take()
		var kinds []string
		for _, e := range ev {
			kinds = append(kinds, e.fn)
		}
		if len(kinds) == 3 {
			if kinds[1] != "AcquireEnd" || kinds[2] != "HoldEnd" {
				t.Fatalf("events %v, want AcquireStart, AcquireEnd, HoldEnd", kinds)
			}
			return
		}
		rec.mu.Lock()
		rec.events = append(ev, rec.events...)
		rec.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("events %v after 5 s, want 3", kinds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// panicker panics in AcquireStart and ReleaseStart once each.
func panicker() *redislock.Observer {
	var acquire, release sync.Once
	return &redislock.Observer{
		AcquireStart: func(ctx context.Context, _ redislock.Event) context.Context {
			acquire.Do(func() { panic("observer bug") })
			return ctx
		},
		ReleaseStart: func(ctx context.Context, _ redislock.Event) context.Context {
			release.Do(func() { panic("observer bug") })
			return ctx
		},
	}
}

// An observer that panics in a Start: the panic reaches the caller, and
// the Lock is as it was before the call, usable.
func TestPanickingObserverLeavesTheLockUsable(t *testing.T) {
	quick(t)
	b := miniBackend(t)
	ctx := ctxT(t)
	l := mustNew(t, b.client(), "job", redislock.WithObserver(panicker()))
	mustPanic := func(f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		f()
	}
	mustPanic(func() { l.Acquire(ctx) })
	mustAcquire(t, ctx, l)
	mustPanic(func() { l.Release(ctx) })
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release() after a panicking ReleaseStart = %v, want nil (the hold was still ours)", err)
	}
}

// A renewal in flight when Release stops it is reported as canceled, not
// as an error, and logs no warning.
func TestStoppedRenewalIsCanceled(t *testing.T) {
	quick(t)
	b := realBackend(t)
	ctx := ctxT(t)
	c := b.client()
	renewing := make(chan struct{})
	var once sync.Once
	c.AddHook(commandHook(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if scriptOf(cmd) == "extend" {
			once.Do(func() { close(renewing) })
			<-ctx.Done() // held until Release cancels it
			return ctx.Err()
		}
		return next(ctx, cmd)
	}))
	rec := &recorder{}
	logs := &logRecorder{level: slog.LevelWarn}
	l := mustNew(t, c, "job", redislock.WithExpire(300*time.Millisecond), redislock.WithAutoRenewal(), redislock.WithTracking(false),
		redislock.WithObserver(rec.observer()), redislock.WithLogger(slog.New(logs)))
	mustAcquire(t, ctx, l)
	<-renewing
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range rec.take() {
		if e.fn == "ExtendEnd" && e.Outcome != redislock.OutcomeCanceled {
			t.Fatalf("the stopped renewal's ExtendEnd = %+v, want canceled", e)
		}
	}
	logs.none(t, "redis_lock.refresh.thread", slog.LevelWarn)
}

// A Lock, or a Permit, dropped while holding, and collected: its hold
// ends (abandoned), so the observers' count of holds comes back down.
func TestAbandonedHoldEnds(t *testing.T) {
	opts := func(rec *recorder) []redislock.Option {
		return []redislock.Option{redislock.WithExpire(time.Minute), redislock.WithAutoRenewal(), redislock.WithObserver(rec.observer())}
	}
	t.Run("Lock", func(t *testing.T) {
		b, rec := realBackend(t), &recorder{}
		func() {
			mustAcquire(t, context.Background(), mustNew(t, b.client(), "job", opts(rec)...))
		}()
		abandonedHoldEnds(t, rec)
	})
	t.Run("Permit", func(t *testing.T) {
		b, rec := realBackend(t), &recorder{}
		func() {
			if _, err := mustSemaphore(t, b.client(), "pool", 2, opts(rec)...).Acquire(context.Background()); err != nil {
				t.Fatal(err)
			}
		}()
		abandonedHoldEnds(t, rec)
	})
}

// abandonedHoldEnds waits, collecting, for rec's HoldEnd, which must say
// abandoned.
func abandonedHoldEnds(t *testing.T, rec *recorder) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		var end *recorded
		rec.mu.Lock()
		for _, e := range rec.events {
			if e.fn == "HoldEnd" {
				end = &e
			}
		}
		rec.mu.Unlock()
		if end != nil {
			if end.Outcome != redislock.OutcomeAbandoned || !errors.Is(end.Err, redislock.ErrLost) {
				t.Fatalf("HoldEnd of a dropped holder = %+v, want abandoned", end)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no HoldEnd 10 s after the holder was dropped")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An Observer sets only the funcs it wants: the others are skipped. The
// Lock keeps a copy (a func set afterwards is not called), a nil
// *Observer is ignored, and two observers each get every event, in the
// order given.
func TestObserverFuncsAreOptional(t *testing.T) {
	b := miniBackend(t)
	ctx := ctxT(t)
	var mu sync.Mutex
	var calls []string
	note := func(s string) { mu.Lock(); calls = append(calls, s); mu.Unlock() }
	first := &redislock.Observer{AcquireEnd: func(_ context.Context, e redislock.Event) { note("first:" + string(e.Outcome)) }}
	second := &redislock.Observer{
		AcquireEnd: func(_ context.Context, e redislock.Event) { note("second:" + string(e.Outcome)) },
		HoldEnd:    func(e redislock.Event) { note("second:hold-end") },
	}
	l := mustNew(t, b.client(), "job", redislock.WithObserver(first), redislock.WithObserver(nil), redislock.WithObserver(second))
	first.ReleaseEnd = func(context.Context, redislock.Event) { note("first:release (set after New)") }
	mustAcquire(t, ctx, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := strings.Join(calls, ","), "first:acquired,second:acquired,second:hold-end"; got != want {
		t.Fatalf("calls %s, want %s", got, want)
	}
}

// The outcomes of two refusals, as metrics count them: an Extend of a key
// without expire is not-expirable (not expired), and an Acquire refused
// because the key already holds its caller-given id is busy (not an
// error).
func TestObserverOutcomesOfRefusals(t *testing.T) {
	b := miniBackend(t)
	ctx := ctxT(t)
	obs := &recorder{}
	never := mustNew(t, b.client(), "never", redislock.WithExpire(0), redislock.WithObserver(obs.observer()))
	mustAcquire(t, ctx, never)
	if err := never.Extend(ctx, time.Minute); !errors.Is(err, redislock.ErrNotExpirable) {
		t.Fatalf("Extend of a key without expire = %v; want ErrNotExpirable", err)
	}
	first := mustNew(t, b.client(), "given", redislock.WithID("worker-7"))
	mustAcquire(t, ctx, first)
	second := mustNew(t, b.client(), "given", redislock.WithID("worker-7"), redislock.WithObserver(obs.observer()))
	if err := second.TryAcquire(ctx); !errors.Is(err, redislock.ErrAlreadyAcquired) {
		t.Fatalf("TryAcquire of a key holding our given id = %v; want ErrAlreadyAcquired", err)
	}
	var extendEnd, acquireEnd redislock.Outcome
	for _, e := range obs.take() {
		switch {
		case e.fn == "ExtendEnd" && !e.Auto:
			extendEnd = e.Outcome
		case e.fn == "AcquireEnd" && e.Name == "given":
			acquireEnd = e.Outcome
		}
	}
	if extendEnd != redislock.OutcomeNotExpirable || acquireEnd != redislock.OutcomeBusy {
		t.Fatalf("ExtendEnd %q, AcquireEnd %q; want %q and %q", extendEnd, acquireEnd, redislock.OutcomeNotExpirable, redislock.OutcomeBusy)
	}
}
