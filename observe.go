package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/go-redis-lock/redislock/internal/hold"
)

// An Observer receives a Lock's events, for metrics, traces or logs of
// its own (WithLogger writes slog events without one): set the fields of
// the events wanted, and give it to WithObserver. A nil field is skipped,
// so an Observer written today keeps working when events are added. The
// redislockotel module returns one for OpenTelemetry.
//
// The Start funcs return the context the call goes on with, which must be
// ctx or derived from it (a tracer returns ctx with its span, so that
// go-redis's own command spans nest under it); a nil return means ctx.
// Each Start is followed by its End, on the same goroutine, with the
// context Start returned.
//
// The funcs are called synchronously on the Lock's goroutines, the
// renewal's and the local deadline's timer included, so they must be
// quick and must not block; they must not call back into the Lock. They
// must not panic: a panic propagates into the Lock's call, as a go-redis
// hook's does (the Lock stays usable after a panicking Start), and one in
// HoldEnd crashes the goroutine that found the end of the hold. An
// Observer is shared by every Lock it is given to, from many goroutines at
// once: its funcs must be safe for concurrent use.
type Observer struct {
	// AcquireStart is called when Acquire or TryAcquire starts, once the
	// Lock is known to hold nothing (ErrAlreadyAcquired for a Lock that
	// holds is returned without any event).
	AcquireStart func(ctx context.Context, e AcquireStartEvent) context.Context
	// AcquireEnd is called when it returns.
	AcquireEnd func(ctx context.Context, e AcquireEndEvent)
	// Wakeup is called each time a waiting Acquire's BLPOP returns: woken
	// by a release's signal, or at the end of its slice.
	Wakeup func(ctx context.Context, e WakeupEvent)
	// ReleaseStart is called when Release starts (ErrNotAcquired returned
	// without sending, for a Lock acquiring or releasing in another
	// goroutine, has no event).
	ReleaseStart func(ctx context.Context, e ReleaseStartEvent) context.Context
	// ReleaseEnd is called when it returns.
	ReleaseEnd func(ctx context.Context, e ReleaseEndEvent)
	// ExtendStart is called before an extend of the key is sent: by
	// Extend, or by auto-renewal (Auto).
	ExtendStart func(ctx context.Context, e ExtendStartEvent) context.Context
	// ExtendEnd is called when its reply is in.
	ExtendEnd func(ctx context.Context, e ExtendEndEvent)
	// HoldEnd is called once for every hold that started (an AcquireEnd
	// with OutcomeAcquired), when it ends, and never before that
	// AcquireEnd: released (Err is ErrReleased), lost (Reason says why),
	// or dropped (a Lock collected while holding: ReasonAbandoned). It has
	// no context: a loss is found by the renewal, a timer or the key's
	// watch.
	HoldEnd func(e HoldEndEvent)
	// WatchRefused is called when Redis refuses the key watch of a hold
	// that started (tracking unknown or denied: see Check), at most once
	// per hold: a loss is then found by the renewal or the local
	// deadline, not at once. It has no context: the watch finds it.
	WatchRefused func(e WatchRefusedEvent)
}

// joinObservers returns one Observer whose each func calls that func of
// every observer in obs that has it, in order, and whether it has any.
func joinObservers(obs []Observer) (Observer, bool) {
	j := Observer{
		AcquireStart: joinStart(obs, func(o *Observer) func(context.Context, AcquireStartEvent) context.Context { return o.AcquireStart }),
		AcquireEnd:   joinEnd(obs, func(o *Observer) func(context.Context, AcquireEndEvent) { return o.AcquireEnd }),
		Wakeup:       joinEnd(obs, func(o *Observer) func(context.Context, WakeupEvent) { return o.Wakeup }),
		ReleaseStart: joinStart(obs, func(o *Observer) func(context.Context, ReleaseStartEvent) context.Context { return o.ReleaseStart }),
		ReleaseEnd:   joinEnd(obs, func(o *Observer) func(context.Context, ReleaseEndEvent) { return o.ReleaseEnd }),
		ExtendStart:  joinStart(obs, func(o *Observer) func(context.Context, ExtendStartEvent) context.Context { return o.ExtendStart }),
		ExtendEnd:    joinEnd(obs, func(o *Observer) func(context.Context, ExtendEndEvent) { return o.ExtendEnd }),
		HoldEnd:      joinPlain(obs, func(o *Observer) func(HoldEndEvent) { return o.HoldEnd }),
		WatchRefused: joinPlain(obs, func(o *Observer) func(WatchRefusedEvent) { return o.WatchRefused }),
	}
	listens := j.AcquireStart != nil || j.AcquireEnd != nil || j.Wakeup != nil || j.ReleaseStart != nil || j.ReleaseEnd != nil ||
		j.ExtendStart != nil || j.ExtendEnd != nil || j.HoldEnd != nil || j.WatchRefused != nil
	return j, listens
}

// funcs returns the non-nil funcs field picks from each observer.
func funcs[F any](obs []Observer, field func(*Observer) F, isNil func(F) bool) []F {
	var fs []F
	for i := range obs {
		if f := field(&obs[i]); !isNil(f) {
			fs = append(fs, f)
		}
	}
	return fs
}

func joinStart[E any](obs []Observer, field func(*Observer) func(context.Context, E) context.Context) func(context.Context, E) context.Context {
	fs := funcs(obs, field, func(f func(context.Context, E) context.Context) bool { return f == nil })
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return func(ctx context.Context, e E) context.Context {
		for _, f := range fs {
			if c := f(ctx, e); c != nil {
				ctx = c
			}
		}
		return ctx
	}
}

func joinEnd[E any](obs []Observer, field func(*Observer) func(context.Context, E)) func(context.Context, E) {
	fs := funcs(obs, field, func(f func(context.Context, E)) bool { return f == nil })
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return func(ctx context.Context, e E) {
		for _, f := range fs {
			f(ctx, e)
		}
	}
}

func joinPlain[E any](obs []Observer, field func(*Observer) func(E)) func(E) {
	fs := funcs(obs, field, func(f func(E)) bool { return f == nil })
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return func(e E) {
		for _, f := range fs {
			f(e)
		}
	}
}

// LockRef says which lock an event is about.
type LockRef struct {
	Name string // the name given to New
	Key  string // the lock key
	ID   string // the owner id the call sent (see Lock.ID)
	Kind Kind   // KindLock; KindSemaphore, KindWriter or KindReader for the siblings
}

// AcquireStartEvent starts an acquire.
type AcquireStartEvent struct {
	LockRef
	Blocking bool // Acquire; false for TryAcquire
}

// AcquireEndEvent ends an acquire.
type AcquireEndEvent struct {
	LockRef
	Blocking bool
	Wait     time.Duration // from AcquireStart to the end
	Outcome  Outcome       // OutcomeAcquired, OutcomeBusy, OutcomeTimeout or OutcomeError
	Token    int64         // the fencing token of the hold (WithFencing); 0 otherwise
	Err      error         // what the call returned
}

// WakeupEvent is one return of a waiter's BLPOP.
type WakeupEvent struct {
	LockRef
	Cause  WakeCause
	Waited time.Duration // how long the BLPOP took
}

// ReleaseStartEvent starts a Release.
type ReleaseStartEvent struct {
	LockRef
}

// ReleaseEndEvent ends a Release.
type ReleaseEndEvent struct {
	LockRef
	Held    time.Duration // from the acquire to the release; 0 when this Lock had no hold
	Outcome Outcome       // OutcomeReleased, OutcomeExpired, OutcomeTakenOver or OutcomeError
	Err     error         // what the call returned
}

// ExtendStartEvent starts an extend of the key.
type ExtendStartEvent struct {
	LockRef
	Auto bool          // a renewal (WithAutoRenewal); false for Extend
	By   time.Duration // the expire sent
}

// ExtendEndEvent ends an extend.
type ExtendEndEvent struct {
	LockRef
	Auto bool
	By   time.Duration
	// Outcome is OutcomeExtended, OutcomeExpired (the key was gone),
	// OutcomeTakenOver, OutcomeNotExpirable, OutcomeCanceled (a renewal
	// that Release stopped while it was in flight) or OutcomeError (a
	// Redis error, ErrNotReplicated included: a renewal retries it).
	Outcome Outcome
	Err     error
}

// HoldEndEvent ends a hold.
type HoldEndEvent struct {
	LockRef
	Held  time.Duration // from the acquire to the end
	Token int64         // the fencing token of the hold; 0 without WithFencing
	// Reason is why the hold was lost: ReasonExpired, ReasonTakenOver,
	// ReasonUnreachable, ReasonMaxHold, ReasonNotExpirable or
	// ReasonAbandoned; "" when it was released.
	Reason Reason
	Err    error // Lock.Err's error: ErrReleased, or one matching ErrLost
}

// WatchRefusedEvent says that a hold is not watched: Redis refused it.
type WatchRefusedEvent struct {
	LockRef
	Err error // the refusal (an error reply such as NOPERM or an unknown command)
}

// Outcome is how a call ended, in the words metrics use.
type Outcome string

const (
	OutcomeAcquired     Outcome = "acquired"      // the lock is now held
	OutcomeBusy         Outcome = "busy"          // TryAcquire found it held (ErrLocked), or held under our own given id
	OutcomeTimeout      Outcome = "timeout"       // ctx ended first
	OutcomeReleased     Outcome = "released"      // the key was ours and is deleted
	OutcomeExtended     Outcome = "extended"      // the key was ours and has its new expire
	OutcomeExpired      Outcome = "expired"       // the key was gone
	OutcomeTakenOver    Outcome = "taken_over"    // the key held another id
	OutcomeNotExpirable Outcome = "not_expirable" // the key is ours but has no expire (ErrNotExpirable)
	OutcomeCanceled     Outcome = "canceled"      // a renewal given up because Release stopped it
	OutcomeError        Outcome = "error"         // a Redis or connection error, or a refusal
)

// WakeCause is why a waiter's BLPOP returned.
type WakeCause string

const (
	WakeSignal  WakeCause = "signal"  // it popped a release's signal
	WakeTimeout WakeCause = "timeout" // its slice ran out: it tries again
)

// Reason is why a hold was lost, in the words metrics use.
type Reason string

const (
	ReasonExpired      Reason = "expired"       // ErrExpired
	ReasonTakenOver    Reason = "taken_over"    // ErrTakenOver
	ReasonUnreachable  Reason = "unreachable"   // ErrUnreachable
	ReasonMaxHold      Reason = "max_hold"      // ErrMaxHold
	ReasonNotExpirable Reason = "not_expirable" // ErrNotExpirable: the key's expire was removed
	ReasonAbandoned    Reason = "abandoned"     // the Lock was dropped while holding and collected: its key expires on its own
	ReasonOther        Reason = "other"         // any other error ending a hold
	reasonNone         Reason = ""
)

// ReasonOf returns the Reason of err, an error from Lock.Err: "" for nil
// or ErrReleased.
func ReasonOf(err error) Reason {
	switch {
	case err == nil, errors.Is(err, ErrReleased):
		return reasonNone
	case errors.Is(err, ErrExpired):
		return ReasonExpired
	case errors.Is(err, ErrTakenOver):
		return ReasonTakenOver
	case errors.Is(err, ErrUnreachable):
		return ReasonUnreachable
	case errors.Is(err, ErrMaxHold):
		return ReasonMaxHold
	case errors.Is(err, ErrNotExpirable):
		return ReasonNotExpirable
	case errors.Is(err, hold.ErrAbandoned):
		return ReasonAbandoned
	}
	return ReasonOther
}
