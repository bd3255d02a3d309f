package redislock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/go-redis-lock/redislock/internal/hold"
	"github.com/go-redis-lock/redislock/internal/wire"
)

// events sends a Lock's events to its observers and its logger. A Lock
// with neither has a nil *events, and every method of a nil *events
// returns at once: the hot path pays one nil check per event.
type events struct {
	obs Observer     // nil funcs: none (several observers are joined into one)
	log *slog.Logger // nil: no logging
}

// newEvents returns the events of a config, nil when nothing listens.
func newEvents(obs []Observer, log *slog.Logger) *events {
	o, listens := joinObservers(obs)
	if !listens && log == nil {
		return nil
	}
	return &events{obs: o, log: log}
}

// Python's logger names (python-redis-lock 4.x), and ours for the events
// it does not log, under the same root, so that one filter on the logger
// attribute finds both fleets' lines.
const (
	loggerAcquire         = "redis_lock.acquire"
	loggerRefreshStart    = "redis_lock.refresh.start"
	loggerRefreshThread   = "redis_lock.refresh.thread"
	loggerRefreshShutdown = "redis_lock.refresh.shutdown"
	loggerRefreshExit     = "redis_lock.refresh.exit"
	loggerRelease         = "redis_lock.release"
	loggerLost            = "redis_lock.lost"  // ours: Python is not told of a loss
	loggerReset           = "redis_lock.reset" // ours: Python's reset and reset_all log nothing
	loggerWatch           = "redis_lock.watch" // ours: the key watch (WithTracking)
)

// logging reports whether level is logged; when it is not, no attribute
// is built.
func (e *events) logging(ctx context.Context, level slog.Level) bool {
	return e != nil && e.log != nil && e.log.Enabled(ctx, level)
}

// logLock writes one event of lock in with the Python logger name and the
// lock's attributes, then attrs.
func (e *events) logLock(ctx context.Context, level slog.Level, logger, msg string, in Event, attrs ...slog.Attr) {
	all := make([]slog.Attr, 0, 5+len(attrs))
	all = append(all,
		slog.String("logger", logger),
		slog.String("lock", in.Name),
		slog.String("key", in.Key))
	if in.ID != "" {
		all = append(all, slog.String("owner", in.ID))
	}
	if in.Kind != KindLock && in.Kind != "" {
		all = append(all, slog.String("kind", string(in.Kind)))
	}
	all = append(all, attrs...)
	e.log.LogAttrs(ctx, level, msg, all...)
}

func errAttr(err error) slog.Attr { return slog.String("error", err.Error()) }

// info returns the Event of l under id, with only what names the lock.
func (l *core) info(id string) Event {
	return Event{Name: l.name, Key: l.keys[0], ID: id, Kind: l.proto.ref()}
}

func (e *events) acquireStart(ctx context.Context, in Event, blocking bool) context.Context {
	if e == nil {
		return ctx
	}
	if e.logging(ctx, slog.LevelDebug) {
		e.logLock(ctx, slog.LevelDebug, loggerAcquire, "acquiring lock", in, slog.Bool("blocking", blocking))
	}
	if e.obs.AcquireStart != nil {
		in.Blocking = blocking
		if c := e.obs.AcquireStart(ctx, in); c != nil {
			ctx = c
		}
	}
	return ctx
}

func (e *events) acquireEnd(ctx context.Context, in Event, blocking bool, wait time.Duration, token int64, err error, ctxErr error) {
	if e == nil {
		return
	}
	outcome := acquireOutcome(err, ctxErr)
	switch {
	case outcome == OutcomeAcquired && e.logging(ctx, slog.LevelInfo):
		e.logLock(ctx, slog.LevelInfo, loggerAcquire, "acquired lock", in,
			slog.Duration("wait", wait), slog.Int64("token", token))
	case outcome == OutcomeBusy && !blocking && e.logging(ctx, slog.LevelWarn):
		// As Python: a non-blocking miss is a warning, a blocking
		// timeout is not.
		e.logLock(ctx, slog.LevelWarn, loggerAcquire, "failed to acquire lock: it is held", in, errAttr(err))
	case outcome != OutcomeAcquired && e.logging(ctx, slog.LevelDebug):
		e.logLock(ctx, slog.LevelDebug, loggerAcquire, "did not acquire lock", in,
			slog.Duration("wait", wait), slog.String("outcome", string(outcome)), errAttr(err))
	}
	if e.obs.AcquireEnd != nil {
		in.Blocking, in.Wait, in.Outcome, in.Token, in.Err = blocking, wait, outcome, token, err
		e.obs.AcquireEnd(ctx, in)
	}
}

// acquireOutcome classifies what Acquire or TryAcquire returned; ctxErr is
// the call's context's error when it returned.
func acquireOutcome(err, ctxErr error) Outcome {
	switch {
	case err == nil:
		return OutcomeAcquired
	case ctxErr != nil && errors.Is(err, ErrLocked):
		return OutcomeTimeout
	case errors.Is(err, ErrLocked), errors.Is(err, ErrAlreadyAcquired):
		return OutcomeBusy
	}
	return OutcomeError
}

// waiting logs that a blocking acquire found the lock held by holder ("":
// unknown, or a woken waiter's turn) for ttl more, and waits.
func (e *events) waiting(ctx context.Context, in Event, holder string, ttl time.Duration) {
	if e.logging(ctx, slog.LevelInfo) {
		o := slog.Group("holder", slog.String("id", holder))
		if p, ok := wire.ParseOwner(holder); ok {
			o = slog.Group("holder", slog.String("id", holder), slog.String("host", p.Host), slog.Int("pid", p.PID))
		}
		e.logLock(ctx, slog.LevelInfo, loggerAcquire, "waiting for lock", in, o, slog.Duration("ttl", ttl))
	}
}

func (e *events) wakeup(ctx context.Context, in Event, woken bool, waited time.Duration) {
	if e == nil {
		return
	}
	if e.obs.Wakeup != nil {
		in.Woken, in.Wait = woken, waited
		e.obs.Wakeup(ctx, in)
	}
}

// gaveBack logs that an acquire's reply was lost, or that it failed after
// its BLPOP popped a signal, and that the lock, or the signal, is being
// given back.
func (e *events) gaveBack(ctx context.Context, in Event, err error) {
	if e == nil {
		return
	}
	if e.logging(ctx, slog.LevelWarn) {
		e.logLock(ctx, slog.LevelWarn, loggerAcquire, "acquire failed with no reply, or after popping a wake-up signal: giving back what it may have taken", in, errAttr(err))
	}
}

func (e *events) releaseStart(ctx context.Context, in Event) context.Context {
	if e == nil {
		return ctx
	}
	if e.logging(ctx, slog.LevelDebug) {
		e.logLock(ctx, slog.LevelDebug, loggerRelease, "releasing lock", in)
	}
	if e.obs.ReleaseStart != nil {
		if c := e.obs.ReleaseStart(ctx, in); c != nil {
			ctx = c
		}
	}
	return ctx
}

func (e *events) releaseEnd(ctx context.Context, in Event, held time.Duration, outcome Outcome, err error) {
	if e == nil {
		return
	}
	switch {
	case (outcome == OutcomeExpired || outcome == OutcomeTakenOver) && e.logging(ctx, slog.LevelWarn):
		e.logLock(ctx, slog.LevelWarn, loggerRelease, "release found the lock no longer ours", in,
			slog.String("outcome", string(outcome)), slog.Duration("held", held))
	case outcome == OutcomeError && e.logging(ctx, slog.LevelWarn):
		e.logLock(ctx, slog.LevelWarn, loggerRelease, "release failed", in, errAttr(err))
	}
	if e.obs.ReleaseEnd != nil {
		in.Held, in.Outcome, in.Err = held, outcome, err
		e.obs.ReleaseEnd(ctx, in)
	}
}

func (e *events) extendStart(ctx context.Context, in Event, auto bool, by time.Duration) context.Context {
	if e == nil {
		return ctx
	}
	if auto && e.logging(ctx, slog.LevelDebug) {
		e.logLock(ctx, slog.LevelDebug, loggerRefreshThread, "renewing lock", in, slog.Duration("expire", by))
	}
	if e.obs.ExtendStart != nil {
		in.Auto, in.By = auto, by
		if c := e.obs.ExtendStart(ctx, in); c != nil {
			ctx = c
		}
	}
	return ctx
}

// extendEnd ends an extend whose reply was n, err (the extend script's
// reply). A renewal that failed is retried when retrying; one that is not
// was stopped by Release. left is what is left before the hold's local
// deadline.
func (e *events) extendEnd(ctx context.Context, in Event, auto bool, by time.Duration, n int64, err error, left time.Duration, retrying bool) {
	if e == nil {
		return
	}
	outcome := extendOutcome(n, err)
	if auto && !retrying && outcome == OutcomeError {
		outcome = OutcomeCanceled // Release stopped the renewal while it was in flight
	}
	if retrying && outcome == OutcomeError && e.logging(ctx, slog.LevelWarn) {
		e.logLock(ctx, slog.LevelWarn, loggerRefreshThread, "renewal failed: retrying", in,
			errAttr(err), slog.Duration("left", left))
	}
	if e.obs.ExtendEnd != nil {
		in.Auto, in.By, in.Outcome, in.Err = auto, by, outcome, extendErr(n, err)
		e.obs.ExtendEnd(ctx, in)
	}
}

// extendOutcome classifies an extend script's reply.
func extendOutcome(n int64, err error) Outcome {
	switch {
	case err != nil:
		return OutcomeError
	case n == 0:
		return OutcomeExtended
	case n == 1:
		return OutcomeExpired
	case n == 2:
		return OutcomeNotExpirable
	}
	return OutcomeTakenOver
}

// extendErr is the error an extend's reply stands for.
func extendErr(n int64, err error) error {
	switch {
	case err != nil:
		return err
	case n == 1 || n == 3:
		return ErrNotAcquired
	case n == 2:
		return ErrNotExpirable
	}
	return nil
}

// holdEnd reports that h ended with err. Called once per hold, without
// h.mu held.
func (e *events) holdEnd(in Event, h *hold.Hold, err error) {
	if e == nil {
		return
	}
	held := time.Since(h.Start())
	outcome := holdOutcome(err)
	if outcome != OutcomeReleased && e.logging(context.Background(), slog.LevelError) {
		e.logLock(context.Background(), slog.LevelError, loggerLost, "lock lost", in,
			slog.String("reason", string(outcome)), errAttr(err), slog.Duration("held", held))
	}
	if e.obs.HoldEnd != nil {
		in.Held, in.Token, in.Outcome, in.Err = held, h.Token(), outcome, err
		e.obs.HoldEnd(in)
	}
}

func (e *events) renewalStart(in Event, every time.Duration) {
	if e == nil {
		return
	}
	if e.logging(context.Background(), slog.LevelDebug) {
		e.logLock(context.Background(), slog.LevelDebug, loggerRefreshStart, "starting renewal", in, slog.Duration("interval", every))
	}
}

func (e *events) renewalShutdown(in Event) {
	if e == nil {
		return
	}
	if e.logging(context.Background(), slog.LevelDebug) {
		e.logLock(context.Background(), slog.LevelDebug, loggerRefreshShutdown, "stopping renewal", in)
	}
}

func (e *events) renewalExit(in Event) {
	if e == nil {
		return
	}
	if e.logging(context.Background(), slog.LevelDebug) {
		e.logLock(context.Background(), slog.LevelDebug, loggerRefreshExit, "renewal exited", in)
	}
}

// reset logs a Reset (name set) or a ResetAll.
func (e *events) reset(ctx context.Context, in Event, deleted int, err error) {
	if e == nil {
		return
	}
	if err != nil || !e.logging(ctx, slog.LevelInfo) {
		return
	}
	if in.Name == "" {
		e.log.LogAttrs(ctx, slog.LevelInfo, "reset all locks", slog.String("logger", loggerReset), slog.Int("count", deleted))
		return
	}
	e.logLock(ctx, slog.LevelInfo, loggerReset, "reset lock", in, slog.Int("count", deleted))
}

// watchRefused logs that the hold of in is no longer watched: Redis refused
// the key watch (see watch.Refuses), and a loss is found by renewal or
// the local deadline.
func (e *events) watchRefused(in Event, err error) {
	if e == nil {
		return
	}
	if e.obs.WatchRefused != nil {
		in.Err = err
		e.obs.WatchRefused(in)
	}
	ctx := context.Background()
	if !e.logging(ctx, slog.LevelWarn) {
		return
	}
	e.logLock(ctx, slog.LevelWarn, loggerWatch, "key watch refused: a loss is found at the next renewal or the local deadline", in, errAttr(err))
}
