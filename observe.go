package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/go-redis-lock/redislock/internal/hold"
)

// An Observer receives a Lock's events, for metrics, traces or logs: set
// the funcs wanted (a nil one is skipped) and give it to WithObserver. The
// redislockotel module returns one for OpenTelemetry. The funcs run
// synchronously on the Lock's goroutines: they must be quick and safe for
// concurrent use, and must not block, call back into the Lock or panic. A
// panic propagates into the Lock's call (the Lock stays usable after a
// panicking Start); one in HoldEnd crashes the goroutine that found the end
// of the hold.
type Observer struct {
	// AcquireStart and AcquireEnd bracket Acquire and TryAcquire, once the
	// Lock is known to hold nothing, with Blocking; AcquireEnd adds Wait,
	// Token, Err and Outcome. Each Start func returns the context the call
	// goes on with, ctx or derived from it (nil: ctx), which its End gets,
	// on the same goroutine.
	AcquireStart func(ctx context.Context, e Event) context.Context
	AcquireEnd   func(ctx context.Context, e Event)
	// Wakeup is called each time a waiting Acquire wakes, with Woken, Wait.
	Wakeup func(ctx context.Context, e Event)
	// ReleaseStart and ReleaseEnd bracket Release, but for one that returns
	// ErrNotAcquired without sending (another goroutine is acquiring or
	// releasing through the Lock); ReleaseEnd has Held, Err and Outcome.
	ReleaseStart func(ctx context.Context, e Event) context.Context
	ReleaseEnd   func(ctx context.Context, e Event)
	// ExtendStart and ExtendEnd bracket an Extend or a renewal (Auto),
	// with By; ExtendEnd adds Err and Outcome (OutcomeError includes
	// ErrNotReplicated).
	ExtendStart func(ctx context.Context, e Event) context.Context
	ExtendEnd   func(ctx context.Context, e Event)
	// HoldEnd is called once for every hold that started, when it ends,
	// never before its AcquireEnd, with Held, Token, Err (ErrReleased, or
	// one matching ErrLost) and Outcome.
	HoldEnd func(e Event)
	// WatchRefused is called, at most once per hold, when Redis refuses
	// to watch the held key (see WithTracking), with Err: a loss is then
	// found by the renewal or the local deadline.
	WatchRefused func(e Event)
}

// joinObservers returns one Observer whose each func calls that func of
// every observer in obs that has it, in order, and whether it has any.
func joinObservers(obs []Observer) (Observer, bool) {
	j := Observer{
		AcquireStart: joinStart(obs, func(o *Observer) func(context.Context, Event) context.Context { return o.AcquireStart }),
		AcquireEnd:   joinEnd(obs, func(o *Observer) func(context.Context, Event) { return o.AcquireEnd }),
		Wakeup:       joinEnd(obs, func(o *Observer) func(context.Context, Event) { return o.Wakeup }),
		ReleaseStart: joinStart(obs, func(o *Observer) func(context.Context, Event) context.Context { return o.ReleaseStart }),
		ReleaseEnd:   joinEnd(obs, func(o *Observer) func(context.Context, Event) { return o.ReleaseEnd }),
		ExtendStart:  joinStart(obs, func(o *Observer) func(context.Context, Event) context.Context { return o.ExtendStart }),
		ExtendEnd:    joinEnd(obs, func(o *Observer) func(context.Context, Event) { return o.ExtendEnd }),
		HoldEnd:      joinPlain(obs, func(o *Observer) func(Event) { return o.HoldEnd }),
		WatchRefused: joinPlain(obs, func(o *Observer) func(Event) { return o.WatchRefused }),
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

// An Event is what an Observer's funcs get: which lock, and what happened.
// Each func sets the fields its doc names; the others are zero.
type Event struct {
	Name string // the name given to New
	Key  string // the lock key (a Semaphore's holders key; an RWMutex's writer or readers key)
	ID   string // the owner id the call sent, or the hold's (see Lock.ID)
	Kind Kind   // KindLock; KindSemaphore, KindWriter or KindReader for the siblings

	Blocking bool          // an acquire's: Acquire; false for TryAcquire
	Auto     bool          // an extend's: a renewal; false for Extend
	Woken    bool          // a Wakeup's: a release's signal woke it; false: one wait slice ran out
	Wait     time.Duration // AcquireEnd: from AcquireStart to the end; Wakeup: how long that wait took
	Held     time.Duration // ReleaseEnd, HoldEnd: from the acquire to the end (0: nothing was held)
	By       time.Duration // an extend's: the expire sent
	Token    int64         // AcquireEnd, HoldEnd: the fencing token of the hold (WithFencing); 0 otherwise
	Outcome  Outcome       // the End funcs' and HoldEnd's: how it ended
	Err      error         // the End funcs': what the call returned; HoldEnd: Err's; WatchRefused: the refusal
}

// Outcome is how a call or a hold ended, in the words metrics use.
type Outcome string

const (
	OutcomeAcquired     Outcome = "acquired"      // the lock is now held
	OutcomeBusy         Outcome = "busy"          // TryAcquire found it held (ErrLocked), or held under our own given id
	OutcomeTimeout      Outcome = "timeout"       // ctx ended first
	OutcomeReleased     Outcome = "released"      // the key was ours and is deleted
	OutcomeExtended     Outcome = "extended"      // the key was ours and has its new expire
	OutcomeExpired      Outcome = "expired"       // the key was gone (ErrExpired)
	OutcomeTakenOver    Outcome = "taken_over"    // the key held another id (ErrTakenOver)
	OutcomeNotExpirable Outcome = "not_expirable" // the key is ours but has no expire (ErrNotExpirable)
	OutcomeUnreachable  Outcome = "unreachable"   // a hold lost for want of answers (ErrUnreachable)
	OutcomeMaxHold      Outcome = "max_hold"      // a hold ended by WithMaxHold (ErrMaxHold)
	OutcomeAbandoned    Outcome = "abandoned"     // a hold whose Lock was dropped and collected: its key expires on its own
	OutcomeCanceled     Outcome = "canceled"      // a renewal given up because Release stopped it
	OutcomeError        Outcome = "error"         // a Redis or connection error, a refusal, or another end of a hold
)

// holdOutcome is the Outcome of a hold that ended with err, Lock.Err's
// error.
func holdOutcome(err error) Outcome {
	switch {
	case err == nil, errors.Is(err, ErrReleased):
		return OutcomeReleased
	case errors.Is(err, ErrExpired):
		return OutcomeExpired
	case errors.Is(err, ErrTakenOver):
		return OutcomeTakenOver
	case errors.Is(err, ErrUnreachable):
		return OutcomeUnreachable
	case errors.Is(err, ErrMaxHold):
		return OutcomeMaxHold
	case errors.Is(err, ErrNotExpirable):
		return OutcomeNotExpirable
	case errors.Is(err, hold.ErrAbandoned):
		return OutcomeAbandoned
	}
	return OutcomeError
}
